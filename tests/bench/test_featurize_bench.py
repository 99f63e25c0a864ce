"""The featurize benchmark runs end to end on a small real sample and reports what it measured."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.featurize import main, write_judged_pairs
from pipeline.config import Settings
from pipeline.store import Store


def test_benchmark_writes_rates_and_ratios_for_each_scale(
    settings: Settings, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = write_judged_pairs(store, settings, max_queries=150)
    monkeypatch.setenv("DEEPSENT_STORE", settings.store)
    out = tmp_path / "featurize.json"
    assert main(["--repeat", "2", "--scales", "1", "2", "--shard-rows", "200", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["source"].endswith("pairs/train.parquet") and results["pairs"] == rows["train"]
    for scale in (1, 2):
        at_scale = results["scales"][str(scale)]
        assert at_scale["pairs"] == scale * rows["train"] and at_scale["shards"] == -(-scale * rows["train"] // 200)
        runs = at_scale["runs"]
        # both encoders hash the same words and featurise every pair, on either cluster
        assert len({runs[k]["words"] for k in runs}) == 1 and {runs[k]["pairs"] for k in runs} == {at_scale["pairs"]}
        assert len(runs["shipped_w1"]["all_pair_seconds"]) == 2 and len(runs["naive_w2"]["all_pair_seconds"]) == 1
        assert runs["naive_w1"]["pair_cpu"]["workers_tasks_cpu_s"] > 0  # the task threads are told from Dask's own
        for key, ratio in at_scale["ratios"].items():
            metric, rest = key.split("_per_s_")
            expected = (runs["shipped_w2"][f"{metric}_per_s"] / runs["shipped_w1"][f"{metric}_per_s"]
                        if rest == "shipped_2w_vs_1w" else None)
            assert ratio > 0 and (expected is None or ratio == pytest.approx(expected, abs=0.01))
