"""The search benchmark runs end to end at a tiny size and reports what it measured."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.search import main


def test_benchmark_measures_every_index_at_each_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSENT_STORE", raising=False)  # random vectors
    out = tmp_path / "search.json"
    assert main(["--base", "1500", "--sizes", "real", "4000", "--queries", "200", "--single", "50", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["source"].startswith("random unit vectors") and [r["vectors"] for r in results["runs"]] == [1500, 4000]
    for run in results["runs"]:
        indexes = run["indexes"]
        assert [indexes[k]["type"] for k in ("exact", "ivf", "hnsw")] == ["IndexFlatIP", "IndexIVFFlat", "IndexHNSWFlat"]
        assert indexes["exact"]["recall_at_10"] == {"perturbed": 1.0}  # exact search is its own truth
        for name in ("ivf", "hnsw"):
            assert 0.5 < indexes[name]["recall_at_10"]["perturbed"] <= 1.0
            latency = indexes[name]["single"]
            assert latency["calls"] == 50 and 0 < latency["p50_ms"] <= latency["p99_ms"]
            expected = latency["p99_ms"] < 10 and indexes[name]["recall_at_10"]["perturbed"] >= 0.95
            assert run["goal"][name] == expected
        assert indexes["hnsw"]["params"]["tune_recall_at_10"] >= 0.95 or indexes["hnsw"]["params"]["efSearch"] == 4096
        assert indexes["exact"]["batch_100"]["calls"] == 2 and indexes["exact"]["index_mib"] > 0
