"""Every tower by name: parameter counts of Table IV, shapes, DSSM/CLSM against direct formulas."""
from __future__ import annotations

from typing import Callable

import pytest
import torch

from encoders.towers.batch import Sentence, SentenceBatch
from encoders.towers.tower_catalog import tower_names
from encoders.towers.tower_classes import build_tower, display_name, param_count, resolve_config
from encoders.towers.twotower import TwoTowerModel
from pipeline.core.errors import ConfigError

PAPER_TRIGRAMS = 50_000  # Table IV's sizes are stated for ~50k letter trigrams


def _count(model: str, **config: object) -> int:
    with torch.device("meta"):  # sizes only, no memory
        return param_count(build_tower(model, PAPER_TRIGRAMS, **config))


@pytest.mark.parametrize("ncell,paper", [(32, 4.8e6), (64, 9.6e6), (96, 14.4e6)])
def test_lstm_sizes_of_table_iv(ncell: int, paper: float) -> None:
    count = _count("lstm", ncell=ncell)
    assert count == PAPER_TRIGRAMS * 3 * ncell + 3 * ncell * ncell + 3 * ncell  # W1,W3,W4 + W_rec + b
    assert abs(count - paper) / paper < 0.01


def test_baseline_sizes_of_table_iv() -> None:
    assert abs(_count("dssm") - 14.4e6) / 14.4e6 < 0.01  # 288/96
    assert abs(_count("rnn", nhid=288) - 14.4e6) / 14.4e6 < 0.01
    for win, paper in ((1, 14.4e6), (3, 43.2e6), (5, 72e6)):
        assert abs(_count("clsm", win=win) - paper) / paper < 0.01
    assert _count("bilstm") == 2 * _count("lstm")
    assert _count("lstm", forget_gate=True, peepholes=True) == _count("lstm") + PAPER_TRIGRAMS * 96 + 96 * 96 + 96 + 3 * 96 * 96


@pytest.mark.parametrize("model", tower_names("trigrams"))
def test_every_tower_embeds_to_out_dim(model: str, make_sentences: Callable[..., list[Sentence]]) -> None:
    torch.manual_seed(0)
    two = TwoTowerModel(model, 60)
    batch = SentenceBatch.from_sentences(make_sentences(7, 60, 9))
    for side in ("query", "doc"):
        vectors = two.embed(batch, side)
        assert vectors.shape == (7, two.out_dim) and torch.isfinite(vectors).all()
    assert two.param_counts()["total"] == 2 * param_count(two.query_tower)
    # separate towers: same config, different weights
    assert not torch.equal(two.embed(batch, "query"), two.embed(batch, "doc"))


def _bag(sentence_words: list[tuple[list[int], list[int]]], vocab: int) -> torch.Tensor:
    """The trigram count vector of some words."""
    vec = torch.zeros(vocab)
    for ids, counts in sentence_words:
        for i, c in zip(ids, counts):
            vec[i] += c
    return vec


def test_dssm_is_two_tanh_layers_over_the_trigram_bag(make_sentences: Callable[..., list[Sentence]]) -> None:
    torch.manual_seed(2)
    tower = build_tower("dssm", 30, nhid=12, nout=5)
    sentences = make_sentences(4, 30, 6, seed=4)
    got = tower(SentenceBatch.from_sentences(sentences))
    with torch.no_grad():
        for b, (ids, counts) in enumerate(sentences):
            hidden = torch.tanh(tower.hidden.bag.weight.T @ _bag(list(zip(ids, counts)), 30) + tower.hidden_bias)
            torch.testing.assert_close(got[b], torch.tanh(tower.semantic(hidden)))


def test_clsm_convolves_word_windows_and_max_pools(make_sentences: Callable[..., list[Sentence]]) -> None:
    torch.manual_seed(3)
    tower = build_tower("clsm", 30, win=3, nhid=6, nout=4)
    with torch.no_grad():
        tower.conv_bias.normal_()
    sentences = make_sentences(5, 30, 6, seed=8)
    got = tower(SentenceBatch.from_sentences(sentences))
    weight = tower.conv.bag.weight.view(30, 3, 6)  # W_k for window offset k
    with torch.no_grad():
        for b, (ids, counts) in enumerate(sentences):
            words = [_bag([(i, c)], 30) for i, c in zip(ids, counts)]
            zero = torch.zeros(30)
            padded = [zero] + words + [zero]
            conv = [sum(weight[:, k].T @ padded[t + k] for k in range(3)) + tower.conv_bias for t in range(len(words))]
            pooled = torch.stack([torch.tanh(c) for c in conv]).max(0).values
            torch.testing.assert_close(got[b], torch.tanh(tower.semantic(pooled)), rtol=1e-5, atol=1e-6)


def test_registry_config_and_names() -> None:
    assert resolve_config("lstm", {"ncell": "64", "forget_gate": "true"})["ncell"] == 64
    assert resolve_config("lstm", {"forget_gate": "false"})["forget_gate"] is False
    assert display_name("lstm", {"ncell": 96}) == "LSTM-RNN (ncell=96)"
    assert display_name("dssm") == "DSSM (nhid=288/96)"
    assert display_name("clsm", {"win": 5}) == "CLSM (win=5)"
    with pytest.raises(ConfigError, match="unknown model 'gru'"):
        build_tower("gru", 10)
    with pytest.raises(ConfigError, match="no setting nhid"):
        build_tower("lstm", 10, nhid=3)
    with pytest.raises(ConfigError, match="not a boolean"):
        resolve_config("lstm", {"peepholes": "maybe"})
    with pytest.raises(ValueError, match="odd"):
        build_tower("clsm", 10, win=2)


@pytest.mark.parametrize("model", ["lstm", "rnn", "bilstm"])
def test_trace_ends_at_the_towers_output(model: str, make_sentences: Callable[..., list[Sentence]]) -> None:
    """``trace(batch, reverse)``'s y after the last word read is the tower's own sentence vector."""
    torch.manual_seed(4)
    tower = build_tower(model, 50, **({"nhid": 6} if model == "rnn" else {"ncell": 6}))
    sentences = make_sentences(6, 50, 7, seed=8)
    batch = SentenceBatch.from_sentences(sentences)
    with torch.no_grad():
        vectors = tower(batch)
    forward, backward = tower.trace(batch), tower.trace(batch, reverse=True)
    assert forward["y"].shape == backward["y"].shape == (6, int(batch.lengths.max()), 6)
    ends = forward["y"][torch.arange(6), batch.lengths - 1], backward["y"][:, 0]  # right to left ends at word 0
    if model == "bilstm":
        torch.testing.assert_close(torch.cat(ends, 1), vectors)
        return
    torch.testing.assert_close(ends[0], vectors)
    reversed_batch = SentenceBatch.from_sentences([(ids[::-1], counts[::-1]) for ids, counts in sentences])
    with torch.no_grad():
        torch.testing.assert_close(ends[1], tower(reversed_batch))  # same weights reading right to left
