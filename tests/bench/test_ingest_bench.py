"""The ingest benchmark runs end to end at a tiny size and reports what it measured."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.stages.ingest import main
from pipeline.core.config import Settings


@pytest.mark.heavy  # over 10 s: left out of make check
def test_benchmark_writes_rates_per_core_and_the_floor(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSENT_DATA_DIR", str(settings.data_dir))
    out = tmp_path / "ingest.json"
    assert main(["--days", "2", "--workers", "1", "2", "--repeat", "2", "--searches-per-day", "150", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    at_size = results["sizes"]["2"]
    assert at_size["files"] == 2 and at_size["rows"] > 1000
    assert len(at_size["json_loads_floor_rounds"]) == 2 and at_size["json_loads_floor_rows_per_s"] > 0
    for count in ("1", "2"):
        timed = at_size["workers"][count]
        assert [run["rows"] for run in timed["rounds"]] == [at_size["rows"]] * 2  # every row read, every round
        assert timed["rows_per_s_per_core"] == pytest.approx(timed["rows_per_s"] / int(count), rel=0.5)
        expected = [run["rows_per_s_per_core"] / floor["rows_per_s"] for run, floor in zip(timed["rounds"], at_size["json_loads_floor_rounds"])]
        assert timed["per_core_vs_floor"]["per_round"] == pytest.approx(expected, abs=0.001)
        assert all(run["cpu_seconds"] > 0 for run in timed["rounds"])
    assert 0 < at_size["pairs_stage"]["rows"] < at_size["rows"] and at_size["pairs_stage"]["pairs"] > 0
    assert at_size["impressions"] > 0 and at_size["rows_per_impression"] == pytest.approx(at_size["rows"] / at_size["impressions"], abs=0.001)
    steps = at_size["steps_in_process"]["cpu_us_per_row"]
    assert set(steps) == {"json_loads_floor", "decode_columns", "check_normalise_hash", "read_file_total", "assemble_and_write"}
    assert all(cost > 0 for cost in steps.values()) and steps["read_file_total"] >= steps["decode_columns"]
    assert at_size["per_line_engine"]["rows"] == at_size["rows"] and at_size["vectorised_vs_per_line_same_workers"] > 0
