"""Gate traces against eqs. (1)-(2) recomputed by hand; keyword and topic counts on a hand-built model."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from encoders.analysis.traces import activation_trace, activation_traces, detect_keywords, keyword_table, topic_allocation, topic_summary
from encoders.towers.tower_classes import build_tower
from encoders.towers.twotower import TwoTowerModel
from pipeline.core.errors import ConfigError, InputError
from pipeline.features.trigram import TrigramVocab, word_bag

TEXT = "Cordless drill kit with 2 batteries"


@pytest.fixture()
def vocab() -> TrigramVocab:
    return TrigramVocab.from_counts({t: 1 for w in ("cordless", "drill", "kit", "with", "batt") for t in
                                     [f"#{w}#"[i:i + 3] for i in range(len(w))]})


def _jitter(module: torch.nn.Module, seed: int) -> None:
    torch.manual_seed(seed)
    with torch.no_grad():
        for prm in module.parameters():
            prm.add_(0.4 * torch.randn_like(prm))


def _word_inputs(vocab: TrigramVocab, words: list[str]) -> list[np.ndarray]:
    """l(t): the trigram count vector of each word (unknown trigrams dropped, all-unknown -> id 0)."""
    out = []
    for w in words:
        ids, counts = word_bag(w, vocab.index)
        vec = np.zeros(vocab.size)
        vec[ids] = counts
        out.append(vec)
    return out


def _eq2(cell: torch.nn.Module, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Eq. (2) word after word in numpy from the cell's own weight blocks (W, W_rec, b, W_p)."""
    n = cell.ncell
    W = cell.inputs.bag.weight.detach().numpy().T
    R, b = cell.recurrent.detach().numpy(), cell.bias.detach().numpy()
    block = {g: slice(k * n, (k + 1) * n) for k, g in enumerate(cell.gates)}
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    peep = (lambda name: getattr(cell, name).weight.detach().numpy()) if cell.peepholes else None
    y, c = np.zeros(n), np.zeros(n)
    rec: dict[str, list[np.ndarray]] = {k: [] for k in ("i", "f", "c", "o", "y")}
    for l_t in inputs:
        pre = {g: W[block[g]] @ l_t + R[block[g]] @ y + b[block[g]] for g in cell.gates}
        i = sig(pre["i"] + (peep("peep_input") @ c if peep else 0))
        f = sig(pre["f"] + (peep("peep_forget") @ c if peep else 0)) if cell.forget_gate else np.ones(n)
        c = f * c + i * np.tanh(pre["g"])
        o = sig(pre["o"] + (peep("peep_output") @ c if peep else 0))
        y = o * np.tanh(c)
        for key, value in (("i", i), ("f", f), ("c", c), ("o", o), ("y", y)):
            rec[key].append(value)
    return {k: np.array(v) for k, v in rec.items()}


@pytest.mark.parametrize("forget_gate,peepholes", [(False, False), (True, True)])
def test_lstm_trace_equals_eq2_both_readings(vocab: TrigramVocab, forget_gate: bool, peepholes: bool) -> None:
    model = TwoTowerModel("lstm", vocab.size, {"ncell": 7, "forget_gate": forget_gate, "peepholes": peepholes})
    _jitter(model, 1)
    trace = activation_trace(model, vocab, TEXT, side="doc")
    words = TEXT.lower().split()
    assert trace.words == tuple(words) and trace.side == "doc"
    cell = model.doc_tower.cell
    forward = _eq2(cell, _word_inputs(vocab, words))
    backward = _eq2(cell, _word_inputs(vocab, words[::-1]))  # same weights, words right to left
    for gate in ("i", "c", "o", "y") + (("f",) if forget_gate else ()):
        assert trace.forward[gate].shape == (len(words), 7)
        np.testing.assert_allclose(trace.forward[gate], forward[gate], atol=1e-5)
        np.testing.assert_allclose(trace.backward[gate], backward[gate][::-1], atol=1e-5)  # back at word positions
    assert "same tower" in trace.backward_source
    query_side = activation_trace(model, vocab, TEXT, side="query")  # the other tower, other weights
    assert not np.allclose(query_side.forward["y"], trace.forward["y"])


def test_bilstm_backward_reading_uses_its_backward_cell(vocab: TrigramVocab) -> None:
    tower = build_tower("bilstm", vocab.size, ncell=5)
    _jitter(tower, 2)
    words = ["drill", "kit", "cordless"]
    trace = activation_trace(tower, vocab, " ".join(words))
    np.testing.assert_allclose(trace.forward["y"], _eq2(tower.forward_cell, _word_inputs(vocab, words))["y"], atol=1e-5)
    expected = _eq2(tower.backward_cell, _word_inputs(vocab, words[::-1]))
    np.testing.assert_allclose(trace.backward["i"], expected["i"][::-1], atol=1e-5)
    assert "backward cell" in trace.backward_source


def test_rnn_trace_equals_eq1(vocab: TrigramVocab) -> None:
    tower = build_tower("rnn", vocab.size, nhid=6)
    _jitter(tower, 3)
    words = TEXT.lower().split()
    W, R = tower.inputs.bag.weight.detach().numpy().T, tower.recurrent.detach().numpy()
    b = tower.bias.detach().numpy()

    def eq1(inputs: list[np.ndarray]) -> np.ndarray:
        y, out = np.zeros(6), []
        for l_t in inputs:
            y = np.tanh(W @ l_t + R @ y + b)
            out.append(y)
        return np.array(out)

    trace = activation_trace(tower, vocab, TEXT)
    assert set(trace.forward) == {"y"}
    np.testing.assert_allclose(trace.forward["y"], eq1(_word_inputs(vocab, words)), atol=1e-5)
    np.testing.assert_allclose(trace.backward["y"], eq1(_word_inputs(vocab, words[::-1]))[::-1], atol=1e-5)


def test_batched_traces_keep_only_real_words(vocab: TrigramVocab) -> None:
    tower = build_tower("lstm", vocab.size, ncell=4)
    _jitter(tower, 4)
    long, short = activation_traces(tower, vocab, [TEXT, "kit"])
    alone = activation_trace(tower, vocab, "kit")
    assert short.forward["y"].shape == (1, 4)  # no padding columns
    np.testing.assert_allclose(short.forward["y"], alone.forward["y"], atol=1e-6)
    assert long.forward["y"].shape == (6, 4)


def test_trace_refuses_empty_text_and_non_recurrent_models(vocab: TrigramVocab) -> None:
    tower = build_tower("lstm", vocab.size, ncell=4)
    with pytest.raises(InputError, match="row 2.*empty"):
        activation_traces(tower, vocab, ["kit", "   "])
    with pytest.raises(ConfigError, match="no recurrent state"):
        activation_trace(build_tower("dssm", vocab.size), vocab, "kit")


def test_detect_keywords_on_hand_written_activations() -> None:
    # 4 words x 3 cells; final |y| = (0.5, 0.1, 0.9) -> top 2 cells are 2 then 0.
    y = np.array([[0.4, 0.1, 0.3],    # word 0: first word read, never counted
                  [0.45, 0.1, 0.3],   # cell 0 moves 0.05 < 0.2 * range(0..0.5)=0.1; cell 2 does not move
                  [0.1, 0.1, 0.8],    # cell 0 moves 0.35 > 0.1; cell 2 moves 0.5 > 0.2 * 0.9
                  [0.5, 0.1, 0.9]])   # cell 0 moves 0.4; cell 2 moves 0.1 < 0.18
    found = detect_keywords(y, top=2, threshold=0.2)
    assert found.cells.tolist() == [2, 0]
    assert found.counts == [None, 0, 2, 1]
    assert found.detected.tolist() == [[False, False], [False, False], [True, True], [False, True]]
    # right to left the final y is word 0's; cell 0 range over 0,.5,.1,.45,.4 is .5: changes .5(first, uncounted) .4 .35 .05
    back = detect_keywords(y, top=1, threshold=0.2, reverse=True)
    assert back.cells.tolist() == [0] and back.counts == [0, 1, 1, None]
    with pytest.raises(ValueError):
        detect_keywords(np.zeros((0, 3)))


# ---- a hand-built model: every activation known --------------------------------------------------
# Words a, b, c, d are one trigram each ("#a#" ...). Recurrent weights are zero and o(t) = sigma(30) = 1,
# so c_j(t) = sum of increments i_j(s) g_j(s) over the words read so far and y = tanh(c). i is
# sigma(+-30) (on/off) and g = tanh(atanh(v)) = v. Increments (cell: {word: v}):
INCREMENTS = {
    0: {"a": 0.3, "b": 0.3}, 1: {"b": 0.3, "c": 0.3}, 2: {"c": 0.3, "d": 0.3}, 3: {"a": 0.3, "d": 0.3},
    4: {"b": 0.3}, 5: {"c": -0.3}, 6: {"b": 0.3, "d": 0.3}, 7: {"d": 0.3, "b": 0.02}, 8: {"c": 0.3},
    9: {"a": 0.3, "c": 0.3}, 10: {"b": 0.02}, 11: {},
}
# Top 10 cells by |final y|: cells 0-9 (|y| >= tanh(.3) = .29); cells 10 (.02) and 11 (0) are out.
# A 0.3 step moves y by .29 or .25 (tanh(.6) - tanh(.3)), always > 0.2 x the cell's range (<= .54);
# cell 7's 0.02 step at b moves y by .02 (.018 reading right to left), < 0.2 x .31.
# Left to right (a is read first: '-'): b <- cells 0,1,4,6 = 4; c <- 1,2,5,8,9 = 5; d <- 2,3,6,7 = 4.
# Right to left (d is read first: '-'): a <- 0,3,9 = 3; b <- 0,1,4,6 = 4; c <- 1,2,5,8,9 = 5.
# Keyword (> 40% of 10 in every counted direction): only c.


@pytest.fixture()
def hand_model() -> tuple[torch.nn.Module, TrigramVocab]:
    vocab = TrigramVocab(["#a#", "#b#", "#c#", "#d#"])
    tower = build_tower("lstm", vocab.size, ncell=12)
    n = 12
    with torch.no_grad():
        for prm in tower.parameters():
            prm.zero_()
        weight = tower.cell.inputs.bag.weight  # columns: i | o | g blocks
        for word in "abcd":
            row = vocab.index[f"#{word}#"]
            for cell in range(n):
                v = INCREMENTS[cell].get(word, 0.0)
                weight[row, cell] = 30.0 if v else -30.0
                weight[row, n + cell] = 30.0
                weight[row, 2 * n + cell] = math.atanh(v)
    return tower, vocab


def test_hand_built_model_activations_are_as_designed(hand_model: tuple[torch.nn.Module, TrigramVocab]) -> None:
    tower, vocab = hand_model
    trace = activation_trace(tower, vocab, "a b c d")
    c = np.cumsum([[INCREMENTS[j].get(w, 0.0) for j in range(12)] for w in "abcd"], axis=0)
    np.testing.assert_allclose(trace.forward["c"], c, atol=1e-6)
    np.testing.assert_allclose(trace.forward["y"], np.tanh(c), atol=1e-6)


def test_keyword_counts_match_the_hand_count(hand_model: tuple[torch.nn.Module, TrigramVocab]) -> None:
    tower, vocab = hand_model
    table = keyword_table(activation_trace(tower, vocab, "a b c d"), top=10, threshold=0.2)
    assert table.words == ("a", "b", "c", "d")
    assert table.left_to_right == [None, 4, 5, 4]
    assert table.right_to_left == [3, 4, 5, None]
    assert table.keywords == [False, False, True, False]
    assert table.to_dict()["keywords"] == ["c"]
    # a threshold of 2% of the range lets cell 7's small step at b count as well (both readings)
    low = keyword_table(activation_trace(tower, vocab, "a b c d"), top=10, threshold=0.02)
    assert low.left_to_right == [None, 5, 5, 4] and low.right_to_left == [3, 5, 5, None]
    assert low.keywords == [False, True, True, False]


def test_topic_allocation_by_hand(hand_model: tuple[torch.nn.Module, TrigramVocab]) -> None:
    tower, vocab = hand_model
    topics = topic_allocation(activation_traces(tower, vocab, ["a b", "c d", "b c"]), top=5)
    # "a b": final |y| .54 for cell 0, .29 for 1,3,4,6,9 (7 and 10: .02) -> top 5 = 0,1,3,4,6 (stable order);
    #   b is taken by 0,1,4,6 (3 moved only at a, the uncounted first word).
    # "c d": .54 for 2; .29 for 1,3,5,6,7,8,9 -> top 5 = 2,1,3,5,6; d taken by 2,3,6.
    # "b c": .54 for 1; .29 for 0,2,4,5,6,8,9 -> top 5 = 1,0,2,4,5; c taken by 1,2,5.
    assert topics.per_query == [{0: ["b"], 1: ["b"], 4: ["b"], 6: ["b"]}, {2: ["d"], 3: ["d"], 6: ["d"]},
                                {1: ["c"], 2: ["c"], 5: ["c"]}]
    assert dict(topics.by_cell[6]) == {"b": 1, "d": 1} and dict(topics.by_cell[2]) == {"d": 1, "c": 1}
    assert topics.to_dict()["by_cell"]["cell 7"] == {"b": 1, "d": 1}
    text = topic_summary(topics)
    assert "7 cells take at least one word over 3 queries" in text and "cell 3 (2 queries)" in text
