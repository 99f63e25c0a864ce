"""Serving's rows of SCALING.md: replicas from the fastest level within the p99 goal, index slices from the
bytes per title the 10^7 benchmark measured."""
from __future__ import annotations

import json
from pathlib import Path

from docs_render.run_blocks import Sources
from docs_render.serving_blocks import INDEX_MEMORY_SHARE, PEAK_FACTOR, search_streamed, serving_scale


def _level(clients: int, qps: float, p99: float) -> dict:
    return {"clients": clients, "queries_per_s": qps, "latency_ms": {"p50": p99 / 2, "p99": p99}}


def _sources(tmp_path: Path, levels: list[dict], streamed: bool = True) -> Sources:
    folder = tmp_path / "bench" / "results"
    folder.mkdir(parents=True)
    (folder / "serve.json").write_text(json.dumps({"cpus": 2, "goal": {"p99_ms": 50.0}, "runs": [{"http": levels}]}))
    if streamed:
        run = {"vectors": 10_000_000, "real_vectors": 44_000, "dim": 480, "noise": 0.1, "index_gib": 9.0,
               "peak_rss_gib": 12.0, "machine_memory_gib": 24.0, "type": "IndexIVFScalarQuantizer", "build_s": 900.0,
               "params": {"codes": "fp16", "nlist": 4096, "nprobe": 60, "tune_queries": 1000},
               "single": {"p50_ms": 4.0, "p99_ms": 9.0}, "recall_at_10": 0.96, "goal_met": True,
               "single_on": "the dev set's judged queries (500), cycled"}
        (folder / "search-streamed.json").write_text(json.dumps({
            "faiss": "1.15.1", "cpus": 2, "load_avg_1m": 0.5, "runs": [run],
            "goal": {"p99_single_ms": 20.0, "recall_at_10": 0.95, "memory_gib": 24}}))
    return Sources(tmp_path)


def test_replicas_come_from_the_fastest_level_within_the_goal_and_slices_from_the_index_bytes(tmp_path: Path) -> None:
    sources = _sources(tmp_path, [_level(1, 60.0, 24.0), _level(8, 150.0, 85.0)])
    text = serving_scale(sources, impressions=1e9, corpus_titles=1e8)
    peak = 1e9 / 86_400 * PEAK_FACTOR
    assert f"{-(-peak // 60):,.0f} replicas of 2 cores" in text and "30 queries/s per core" in text
    assert "60 queries/s at 1 client(s), p99 24 ms (within the 50 ms goal)" in text
    slices = -(-1e8 * 9.0 / 1e7 // (24.0 * INDEX_MEMORY_SHARE))
    assert f"{slices:,.0f} slice(s) of ≤ 12 GiB" in text and "90 GiB" in text
    assert "| 10,000,000 | IndexIVFScalarQuantizer (fp16, nlist 4,096, nprobe 60) |" in search_streamed(sources)


def test_no_level_within_the_goal_says_so_and_no_streamed_run_leaves_the_slices_out(tmp_path: Path) -> None:
    text = serving_scale(_sources(tmp_path, [_level(1, 40.0, 70.0), _level(8, 90.0, 160.0)], streamed=False))
    assert "no level within the 50 ms goal: the fastest level" in text and "90 queries/s at 8 client(s)" in text
    assert "slice" not in text
