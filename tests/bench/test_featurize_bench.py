"""The featurize benchmark runs end to end on a small real sample and reports what it measured."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.stages.featurize import main, write_judged_pairs
from pipeline.core.config import Settings
from pipeline.storage.store import Store


@pytest.mark.heavy  # over 10 s: left out of make check
def test_benchmark_writes_rates_and_ratios_for_each_scale(
    settings: Settings, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = write_judged_pairs(store, settings, max_queries=150)
    monkeypatch.setenv("DEEPSENT_STORE", settings.store)
    out = tmp_path / "featurize.json"
    assert main(["--repeat", "2", "--inner", "3", "--scales", "1", "2", "--naive-scales", "1", "--shard-rows", "200",
                 "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["source"].endswith("pairs/train.parquet") and results["pairs"] == rows["train"]
    for scale in (1, 2):
        at_scale = results["scales"][str(scale)]
        assert at_scale["pairs"] == scale * rows["train"] and at_scale["shards"] == -(-scale * rows["train"] // 200)
        assert at_scale["shard_sizes"]["max"] - at_scale["shard_sizes"]["min"] <= 1 and at_scale["shard_sizes"]["max"] <= 200
        # a job of no-op tasks costs something, and less than a featurize job
        floor = at_scale["dask_floor_seconds"]
        assert 0 < floor["w1"] < at_scale["runs"]["shipped_w1"]["pair_seconds"] and floor["w2"] > 0
        # an idle cluster uses some CPU (heartbeats), far below a core
        assert all(0 < cores < 0.5 for cores in at_scale["idle_cluster_cpu_cores"].values()), at_scale["idle_cluster_cpu_cores"]
        runs = at_scale["runs"]
        # both encoders hash the same words and featurise every pair, on either cluster
        assert len({runs[k]["words"] for k in runs}) == 1 and {runs[k]["pairs"] for k in runs} == {at_scale["pairs"]}
        assert len(runs["shipped_w1"]["all_pair_seconds"]) == 2 and runs["shipped_w1"]["pair_cpu"]["workers_tasks_cpu_s"] > 0
        # the naive loop runs only at the naive scales, once; the task threads' CPU is told from Dask's own
        assert ("naive_w2" in runs) == (scale == 1) and (scale == 2 or len(runs["naive_w2"]["all_pair_seconds"]) == 1)
        for metric, times in (("words_per_s", "all_hash_seconds"), ("pairs_per_s", "all_pair_seconds")):
            paired = at_scale["paired_2w_vs_1w"][metric]
            expected = [a / b for a, b in zip(runs["shipped_w1"][times], runs["shipped_w2"][times])]
            assert paired["per_round"] == pytest.approx(expected, abs=0.001)
            assert paired["min"] <= paired["median"] <= paired["max"]
        for key, ratio in at_scale["ratios"].items():
            metric, rest = key.split("_per_s_")
            expected = (runs["shipped_w2"][f"{metric}_per_s"] / runs["shipped_w1"][f"{metric}_per_s"]
                        if rest == "shipped_2w_vs_1w" else None)
            assert ratio > 0 and (expected is None or ratio == pytest.approx(expected, abs=0.01))
