"""The LSTM cell against a direct transcription of the paper's eq. (2), padding invariance, traces."""
from __future__ import annotations

from typing import Callable

import pytest
import torch

from encoders.towers.batch import Sentence, SentenceBatch
from encoders.towers.lstm import LSTMCell
from encoders.towers.tower_classes import build_tower

VOCAB = 40


def _blocks(cell: LSTMCell) -> dict[str, dict[str, torch.Tensor]]:
    """W_i (ncell x vocab), W_rec_i, b_i per gate name, cut out of the fused layers."""
    n = cell.ncell
    out = {}
    for k, gate in enumerate(cell.gates):
        rows = slice(k * n, (k + 1) * n)
        out[gate] = {
            "W": cell.inputs.bag.weight[:, rows].T,
            "Wrec": cell.recurrent[rows],
            "b": cell.bias[rows],
        }
    return out


def eq2_reference(cell: LSTMCell, sentence: Sentence) -> dict[str, list[torch.Tensor]]:
    """Eq. (2) word by word on one sentence, with l(t) the trigram count vector of word t."""
    p = _blocks(cell)
    n = cell.ncell
    y, c = torch.zeros(n), torch.zeros(n)
    eye_peep = {"p1": None, "p2": None, "p3": None}
    if cell.peepholes:
        eye_peep = {"p1": cell.peep_output.weight, "p3": cell.peep_input.weight}
        if cell.forget_gate:
            eye_peep["p2"] = cell.peep_forget.weight
    trace: dict[str, list[torch.Tensor]] = {k: [] for k in ("i", "f", "c", "o", "y")}
    for word_ids, counts in zip(*sentence):
        l_t = torch.zeros(VOCAB)
        for i, cnt in zip(word_ids, counts):
            l_t[i] += cnt
        y_g = torch.tanh(p["g"]["W"] @ l_t + p["g"]["Wrec"] @ y + p["g"]["b"])
        i_pre = p["i"]["W"] @ l_t + p["i"]["Wrec"] @ y + p["i"]["b"]
        if cell.peepholes:
            i_pre = i_pre + eye_peep["p3"] @ c
        i_t = torch.sigmoid(i_pre)
        if cell.forget_gate:
            f_pre = p["f"]["W"] @ l_t + p["f"]["Wrec"] @ y + p["f"]["b"]
            if cell.peepholes:
                f_pre = f_pre + eye_peep["p2"] @ c
            f_t = torch.sigmoid(f_pre)
        else:
            f_t = torch.ones(n)
        c = f_t * c + i_t * y_g
        o_pre = p["o"]["W"] @ l_t + p["o"]["Wrec"] @ y + p["o"]["b"]
        if cell.peepholes:
            o_pre = o_pre + eye_peep["p1"] @ c
        o_t = torch.sigmoid(o_pre)
        y = o_t * torch.tanh(c)
        for key, value in (("i", i_t), ("f", f_t), ("c", c), ("o", o_t), ("y", y)):
            trace[key].append(value)
    return trace


@pytest.mark.parametrize("forget_gate,peepholes", [(False, False), (True, True), (True, False), (False, True)])
def test_lstm_matches_eq2(forget_gate: bool, peepholes: bool, make_sentences: Callable[..., list[Sentence]]) -> None:
    torch.manual_seed(3)
    tower = build_tower("lstm", VOCAB, ncell=8, forget_gate=forget_gate, peepholes=peepholes, init_scale=0.5)
    # non-zero biases and peepholes so every term of eq. (2) matters
    with torch.no_grad():
        for prm in tower.parameters():
            prm.add_(0.3 * torch.randn_like(prm))
    sentences = make_sentences(9, VOCAB, 6, seed=11)
    batch = SentenceBatch.from_sentences(sentences)
    vectors = tower(batch)
    trace = tower.trace(batch)
    assert set(trace) == ({"i", "f", "c", "o", "y"} if forget_gate else {"i", "c", "o", "y"})
    with torch.no_grad():
        for b, sentence in enumerate(sentences):
            ref = eq2_reference(tower.cell, sentence)
            length = len(sentence[0])
            torch.testing.assert_close(vectors[b], ref["y"][-1], rtol=1e-5, atol=1e-6)
            for key, got in trace.items():
                torch.testing.assert_close(got[b, :length], torch.stack(ref[key]), rtol=1e-5, atol=1e-6)
                assert torch.all(got[b, length:] == 0)


def test_paper_default_has_three_input_blocks() -> None:
    tower = build_tower("lstm", 1000, ncell=32)
    assert tower.cell.gates == ("i", "o", "g")
    assert tower.cell.inputs.bag.weight.shape == (1000, 3 * 32)
    assert not hasattr(tower.cell, "peep_output")


@pytest.mark.parametrize("model", ["lstm", "rnn", "bilstm", "dssm", "clsm"])
def test_padding_does_not_change_a_sentence(model: str, make_sentences: Callable[..., list[Sentence]]) -> None:
    torch.manual_seed(0)
    tower = build_tower(model, VOCAB)
    short = make_sentences(1, VOCAB, 2, seed=5)
    longer = make_sentences(6, VOCAB, 12, seed=6)
    alone = tower(SentenceBatch.from_sentences(short))
    for position in (0, 3, 6):
        mixed = longer[:position] + short + longer[position:]
        in_batch = tower(SentenceBatch.from_sentences(mixed))[position]
        torch.testing.assert_close(in_batch, alone[0], rtol=1e-5, atol=1e-6)


def test_bilstm_backward_reads_right_to_left(make_sentences: Callable[..., list[Sentence]]) -> None:
    torch.manual_seed(1)
    tower = build_tower("bilstm", VOCAB, ncell=6)
    sentences = make_sentences(5, VOCAB, 5, seed=2)
    batch = SentenceBatch.from_sentences(sentences)
    vectors, forward, backward = tower(batch), tower.trace(batch), tower.trace(batch, reverse=True)
    reversed_batch = SentenceBatch.from_sentences([(ids[::-1], counts[::-1]) for ids, counts in sentences])
    right_to_left = tower.backward_cell.run(reversed_batch)[0]
    torch.testing.assert_close(vectors[:, 6:], right_to_left)
    # the right-to-left state after reading the whole sentence sits at word 0
    torch.testing.assert_close(backward["y"][:, 0], right_to_left)
    last = batch.lengths - 1
    torch.testing.assert_close(forward["y"][torch.arange(5), last], vectors[:, :6])
