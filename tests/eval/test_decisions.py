"""Decisions that survive noise, made on a judged gate set: the margin rule, the 1-SE rule, the mix, the refusals."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from encoders.search.margins import paired_margin, simplest_near_best
from encoders.search.served import DecisionQueries, choose_default_mode
from eval.decisions.gate_set import DecisionSet, decision_set, gate_slice, served_decision
from eval.decisions.mix import SHARES, choose_mix
from eval.judgments import load_judged_set
from pipeline.core.config import Settings
from pipeline.core.defaults import GATE_CLICKS, GATE_SLICE
from pipeline.core.errors import ConfigError
from pipeline.text.homedepot import is_gate_query


def test_a_margin_beats_only_when_its_whole_ci_is_above_zero() -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 300)
    assert paired_margin(base + 0.05, base).beats()  # a constant gain: no noise at all
    noisy = paired_margin(base + rng.normal(0.005, 0.2, 300), base)
    assert not noisy.beats() and noisy.ci_low < 0 < noisy.ci_high  # a mean above zero, within the noise
    sample = base + 0.1 * np.sin(np.arange(300))
    assert paired_margin(sample, base) == paired_margin(sample, base)  # seeded: a decision is the same on a re-run
    assert "CI [" in noisy.text() and "over 300 queries" in noisy.text()


def test_the_simplest_option_within_one_standard_error_of_the_best_wins() -> None:
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 1, 400)
    noise = [rng.normal(0, 0.1, 400) for _ in range(5)]
    flat = [base + n - n.mean() + 0.001 * i for i, n in enumerate(noise)]  # rising 0.001 a step: flat within noise
    assert simplest_near_best(flat) == (0, 4)  # not the best mean, the simplest near it
    steep = [base, base + 0.2, base + 0.4]  # each step far beyond the noise
    assert simplest_near_best(steep) == (2, 2)


def _judged(tmp_path: Path, rows: list[tuple[str, str, int]]) -> DecisionSet:
    return DecisionSet(load_judged_set(_write_gate(tmp_path / "gate.csv", rows)), "gate set test", True)


def _two_titles(queries: int) -> list[tuple[str, str, int]]:
    return [row for q in range(queries) for row in ((f"q{q}", f"good {q}", 2), (f"q{q}", f"bad {q}", 0))]


def test_a_flat_mix_curve_picks_minilm_alone_and_a_real_gain_a_share(tmp_path: Path) -> None:
    decision = _judged(tmp_path, _two_titles(200))
    good = np.tile([1.0, 0.0], 200)
    rng = np.random.default_rng(2)
    minilm = good + rng.normal(0, 0.8, 400)  # MiniLM orders about two thirds of the pairs right
    flat = choose_mix(decision, rng.normal(0, 1, 400), minilm)  # an LSTM-RNN that knows nothing
    assert flat.weight == 0.0 and set(flat.curve) == set(SHARES) and flat.curve[0.0] == flat.parts["minilm"]
    assert "MiniLM alone" in flat.why
    helps = choose_mix(decision, good + rng.normal(0, 0.3, 400), minilm)  # an LSTM-RNN that knows better
    assert helps.weight > 0 and helps.margin.beats() and helps.weight <= helps.best
    assert helps.curve[helps.weight] > helps.curve[0.0]


def test_the_gate_slice_is_a_tenth_of_the_training_queries_and_none_of_the_simulators(settings: Settings) -> None:
    from pipeline.simulate.click_model import load_corpus

    gate = gate_slice(settings)
    corpus = load_corpus(settings)
    assert 900 < gate.num_queries < 1150 and gate.name == GATE_SLICE
    assert all(is_gate_query(q) for q in gate.query_raw)
    assert not any(is_gate_query(q) for q in corpus.queries)  # the click model never draws a gate query
    assert set(gate.query_raw).isdisjoint(corpus.queries)
    assert len(set(corpus.product_ids)) > len(set(corpus.doc_ids))  # the gate's products are in the catalogue
    chosen = decision_set(settings)
    assert chosen.gate and chosen.signal.startswith("gate set gate-slice (")
    served = served_decision(settings)
    assert set(served.relevant) <= set(gate.query) and all(g > 0 for d in served.relevant.values() for g in d.values())


def _write_gate(path: Path, rows: list[tuple[str, str, int]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["query", "title", "label"])
        writer.writerows(rows)
    return path


def test_a_gate_set_sharing_a_query_with_the_dev_set_or_the_simulators_source_is_refused(
        settings: Settings, tmp_path: Path) -> None:
    dev = load_judged_set(settings.dev_judgments)
    train = load_judged_set(settings.train_judgments)
    simulated = next(q for q in train.query_raw if not is_gate_query(q))
    gated = [q for q in dict.fromkeys(train.query_raw) if is_gate_query(q)][:3]
    ours = [(q, f"a title no file holds {i}", i % 3) for i, q in enumerate(gated * 2)]
    with pytest.raises(ConfigError, match=r"queries of .*judgments_dev.csv \(the reported dev set\)") as dev_shared:
        decision_set(settings, gate=str(_write_gate(tmp_path / "a.csv", ours + [(dev.query_raw[0].upper(), "x", 1)])))
    assert "\n" not in str(dev_shared.value)
    with pytest.raises(ConfigError, match=r"judgments_train.csv \(the click simulator's source\)"):
        decision_set(settings, gate=str(_write_gate(tmp_path / "b.csv", ours + [(simulated, "x", 1)])))
    fine = decision_set(settings, gate=str(_write_gate(tmp_path / "c.csv", ours)))
    assert fine.gate and fine.judged.num_queries == 3


def test_the_served_mode_is_fused_only_when_it_beats_the_better_single_stage() -> None:
    queries = [f"q{i}" for i in range(80)]
    relevant = {q: {f"{q}-hit": 1.0} for q in queries}

    def search(asked: list[str], k: int, mode: str, weight: float) -> list[list[str]]:
        found = {"dense": lambda i: i % 2 == 0, "bm25": lambda i: i % 3 == 0, "rrf": lambda i: i % 2 == 0 or i == 1,
                 "rerank": lambda i: False, "linear": lambda i: i % 2 == 0}
        return [[f"{q}-hit"] if found[mode](int(q[1:])) else ["miss"] for q in asked]

    level = choose_default_mode(search, DecisionQueries(relevant, "test"))
    assert level["default_mode"] == "dense" and level["reference_mode"] == "dense"  # rrf finds one more: noise
    assert "does not beat dense" in level["why"]

    def better(asked: list[str], k: int, mode: str, weight: float) -> list[list[str]]:
        return [[f"{q}-hit"] if mode == "linear" or (mode == "dense" and int(q[1:]) % 2) else ["miss"] for q in asked]

    fused = choose_default_mode(better, DecisionQueries(relevant, "test"))
    assert fused["default_mode"] == "linear" and fused["margin"]["ci_low"] > 0


def test_the_click_setting_decides_on_the_held_out_click_lists(settings: Settings) -> None:
    clicks = settings.with_overrides(gate_judgments=GATE_CLICKS)
    assert clicks.gate_judgments == GATE_CLICKS and Settings.from_env({}).gate_judgments == GATE_SLICE
    assert Settings.from_env({"DEEPSENT_GATE_JUDGMENTS": "clicks"}).gate_judgments == GATE_CLICKS
