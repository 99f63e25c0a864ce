"""The docs' figures are rendered from JSON: the repository's docs are up to date, and a changed JSON makes them stale."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from docs_render.cli import from_store, hand_typed, main
from docs_render.run_blocks import (NOT_MEASURED, QUICK_RUN, SUITE, Sources, quick_run_cold_start, quick_run_table,
                                    quick_run_when, suite)

ROOT = Path(__file__).resolve().parents[2]


def record(ndcg: float = 0.7) -> dict:
    """A small main-job record with the keys the blocks read."""
    rows = [{"name": "BM25", "kind": "baseline", "settings": "", "params": None, "reference": True,
             **{f"ndcg@{k}": 0.6 for k in (1, 3, 10)}, **{f"sig@{k}": "" for k in (1, 3, 10)}},
            {"name": "LSTM-RNN (ncell=8)", "kind": "model", "settings": "n=2", "params": 1200, "reference": False,
             **{f"ndcg@{k}": ndcg for k in (1, 3, 10)}, **{f"sig@{k}": "▲" for k in (1, 3, 10)}}]
    served = [{"name": "BM25", "mode": "bm25", "recall@10": 0.2, "recall@100": 0.5, "ndcg@10": 0.3, "sig:recall@10": "",
               "sig:recall@100": "", "sig:ndcg@10": "", "linear_weight": None, "latency": {"p50_ms": 1.0, "p99_ms": 2.0}}]
    return {"date": "2026-11-26", "commit": "abc1234", "dirty": False, "cpu_count": 2, "profile": "quick", "seconds": 90.0,
            "timings": {"simulate": 1.5, "train lstm": 60.0}, "counts": {},
            "table": {"judgments": "<data>/homedepot/judgments_dev.csv", "queries": 5, "pairs": 50, "reference": "BM25",
                      "rows": rows},
            "served_search": {"corpus_titles": 1000, "queries": 5, "judgments": "judgments_dev.csv", "rows": served},
            "ship": {"name": "LSTM-RNN (ncell=8)", "click_mrr": {"LSTM-RNN (ncell=8)": 0.5}, "click_lists": 9},
            "ensemble": {"mix": 0.5}, "promotion": {"decision": "promoted", "registered_name": "deepsent-ranker",
                                                     "version": "1", "champion": "1", "gate_set": "click-lists:features/x"}}


def test_the_repository_docs_are_up_to_date_with_their_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check"]) == 0, capsys.readouterr().err


def test_readme_is_short_with_short_lines_and_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    assert max(len(line) for line in lines) <= 200, max(lines, key=len)
    first_code = lines.index("```bash")
    assert [line.split()[:2] for line in lines[first_code + 1:first_code + 3]] == [["make", "run"], ["make", "test"]]


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A small repository: a README with two blocks, a run record and one benchmark's JSON."""
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / QUICK_RUN).write_text(json.dumps(record()))
    shutil.copy(ROOT / "bench" / "results" / "fusion.json", tmp_path / "bench" / "results" / "fusion.json")
    blocks = "".join(f"<!-- {n}:begin (python -m docs_render writes this) -->\nstale\n<!-- {n}:end -->\n\n"
                     for n in ("quick-run-table", "fusion", "suite"))
    (tmp_path / "README.md").write_text(f"# title\n\nWords around the blocks.\n\n{blocks}The end.\n")
    return tmp_path


def test_a_changed_json_makes_check_fail_naming_the_block_and_rendering_fixes_it(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(repo), "--check"]) == 1  # the blocks say "stale"
    assert main(["--root", str(repo)]) == 0
    text = (repo / "README.md").read_text()
    assert text.startswith("# title\n\nWords around the blocks.\n") and text.endswith("The end.\n")
    assert "| **LSTM-RNN (ncell=8), n=2** (shipped) | 1.2 k | **70.0▲** | **70.0▲** | **70.0▲** |" in text
    assert "| served fusion | weight 0.6 | 29.9 (ref) |" in text and NOT_MEASURED in text  # no suite.json yet
    capsys.readouterr()
    assert main(["--root", str(repo), "--check"]) == 0
    (repo / QUICK_RUN).write_text(json.dumps(record(ndcg=0.71)))
    assert main(["--root", str(repo), "--check"]) == 1
    assert "README.md: block 'quick-run-table' is out of date with its JSON" in capsys.readouterr().err
    assert main(["--root", str(repo)]) == 0 and main(["--root", str(repo), "--check"]) == 0
    assert "71.0▲" in (repo / "README.md").read_text()


def test_a_block_without_an_end_or_a_renderer_stops_with_one_line(repo: Path) -> None:
    (repo / "README.md").write_text("<!-- fusion:begin (python -m docs_render writes this) -->\nx\n")
    with pytest.raises(SystemExit, match="README.md: block 'fusion' has no end marker"):
        main(["--root", str(repo), "--check"])
    (repo / "README.md").write_text("<!-- nothing:begin (python -m docs_render writes this) -->\nx\n<!-- nothing:end -->\n")
    with pytest.raises(SystemExit, match="no renderer for block\\(s\\) nothing"):
        main(["--root", str(repo), "--check"])


def test_hand_typed_figures_outside_blocks_and_code_fail_the_check(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert hand_typed("The job took 9.6 min; 12 s to ingest; MiniLM carries 85 % of it; fusion w = 0.6 at 29.9.") == [
        (1, "9.6"), (1, "12 s"), (1, "85 %"), (1, "0.6"), (1, "29.9")]
    allowed = ("Python 3.11, torch 2.13.0, `deepsent train --epochs 8 --lr 0.1`, ncell=96, n = 4, γ = 10, p < 0.05,\n"
               "95 % bootstrap CIs, 48,097 titles, 30 days, 2 cores, commit d6ffbed, 2026-11-25, [x](#a-2.5-anchor)\n"
               "```\nmake run   # 9.6 min\n```\n<!-- fusion:begin (python -m docs_render writes this) -->\n29.9\n<!-- fusion:end -->\n")
    assert hand_typed(allowed) == []
    assert hand_typed("line one\nit took `3 s` then 4 s\n") == [(2, "4 s")]
    main(["--root", str(repo)])
    (repo / "README.md").write_text((repo / "README.md").read_text() + "\nRecall rose to 0.413.\n")
    capsys.readouterr()
    assert main(["--root", str(repo), "--check"]) == 1
    assert re.search(r"README.md:\d+: '0.413' typed by hand", capsys.readouterr().err)


def test_from_store_copies_a_quick_run_record_after_checking_it(tmp_path: Path, repo: Path) -> None:
    latest = tmp_path / "store" / "reports" / "latest"
    latest.mkdir(parents=True)
    with pytest.raises(SystemExit, match="run.json: not found"):
        from_store(tmp_path / "store", repo)
    (latest / "run.json").write_text(json.dumps({**record(), "profile": "full"}))
    with pytest.raises(SystemExit, match="a run of profile 'full'"):
        from_store(tmp_path / "store", repo)
    (latest / "run.json").write_text(json.dumps({"date": "2026-11-26"}))
    with pytest.raises(SystemExit, match="not a record of the main job"):
        from_store(tmp_path / "store", repo)
    (latest / "run.json").write_text(json.dumps(record(ndcg=0.8)))
    assert main(["--root", str(repo), "--from-store", str(tmp_path / "store")]) == 0
    assert json.loads((repo / QUICK_RUN).read_text()) == record(ndcg=0.8)
    assert "80.0▲" in (repo / "README.md").read_text()


def test_suite_block_renders_the_test_runners_record(tmp_path: Path) -> None:
    assert NOT_MEASURED in suite(Sources(tmp_path))
    (tmp_path / SUITE).parent.mkdir(parents=True)
    (tmp_path / SUITE).write_text(json.dumps({
        "date": "2026-11-26", "commit": "abc1234", "passed": 700, "skipped": 10, "failed": 0, "pytest_seconds": 1290.0,
        "install_seconds": None, "total_seconds": 1400.0, "workers": 2, "slowest": [{"test": "tests/x.py::t", "seconds": 80.5}]}))
    text = " ".join(suite(Sources(tmp_path)).split())
    assert "700 passed, 10 skipped, 0 failed; pytest 21.5 min on 2 worker(s), 23.3 min in all." in text
    assert "install" not in text and "`tests/x.py::t` 80.5 s" in text and "CPU" not in text and "budget" not in text
    (tmp_path / SUITE).write_text(json.dumps({  # a report of tests/suite_report.py: CPU time and the tests over budget
        "date": "2026-11-27", "commit": "abc1234", "passed": 700, "skipped": 10, "failed": 0, "pytest_seconds": 600.0,
        "cpu_seconds": 900.0, "total_seconds": None, "workers": 3, "budget_seconds": 60.0,
        "slowest": [{"test": "tests/x.py::t", "seconds": 80.5, "cpu_seconds": 12.0}],
        "over_budget": [{"test": "tests/x.py::t", "seconds": 80.5}]}))
    text = " ".join(suite(Sources(tmp_path)).split())
    assert "pytest 10.0 min on 3 worker(s), 15.0 min of CPU." in text
    assert f"Over the 60.0 s budget per test: 1 (in `{SUITE}`)." in text
    report = json.loads((tmp_path / SUITE).read_text())
    report["over_budget"] = [{"test": "tests/x.py::t", "seconds": 80.5, "reason": "its setup built the suite's chain"},
                             {"test": "tests/y.py::t", "seconds": 70.0, "reason": None}]
    (tmp_path / SUITE).write_text(json.dumps(report))
    text = " ".join(suite(Sources(tmp_path)).split())
    assert f"Over the 60.0 s budget per test: 2 (in `{SUITE}`, with reasons; 1 without)." in text


def test_quick_run_table_marks_the_reference_and_the_shipped_row(tmp_path: Path) -> None:
    (tmp_path / QUICK_RUN).parent.mkdir(parents=True)
    (tmp_path / QUICK_RUN).write_text(json.dumps(record()))
    text = quick_run_table(Sources(tmp_path))
    assert "| BM25 | — | 60.0 (ref) | 60.0 (ref) | 60.0 (ref) |" in text
    assert "| **LSTM-RNN (ncell=8), n=2** (shipped) | 1.2 k | **70.0▲** |" in text
    assert "(5 queries, 50 judged titles)" in text and "`judgments_dev.csv`" in text


def test_the_cold_start_block_shows_each_split_against_both_bm25_rows(tmp_path: Path) -> None:
    def row(key: str, name: str, mode: str, ndcg: float, **versus: tuple[float, str]) -> dict:
        return {"key": key, "name": name, "mode": mode, "recall@10": ndcg, "recall@100": ndcg, "ndcg@10": ndcg,
                "served_default": mode == "linear",
                **{k: {"ndcg@10": {"diff": diff, "mark": mark, "p": 0.01}} for k, (diff, mark) in versus.items()}}

    split = {"queries": 3, "rows": [row("bm25", "BM25", "dense", 0.3, vs_prior=(0.0, "")),
                                    row("bm25+prior", "BM25 + click prior", "bm25+prior", 0.3, vs_bm25=(0.0, "")),
                                    row("m#linear", "Model · linear: fused", "linear", 0.35, vs_bm25=(0.05, "▲"),
                                        vs_prior=(0.05, "▲"))]}
    (tmp_path / QUICK_RUN).parent.mkdir(parents=True)
    (tmp_path / QUICK_RUN).write_text(json.dumps({**record(), "served_search": {"cold_start": {
        "prior": {"clicked_products": 12, "queries": 4, "weight": 0.0}, "splits": {"cold": split, "warm": split}}}}))
    text = quick_run_cold_start(Sources(tmp_path))
    assert "| cold (3) | BM25 | bm25 | 30.0 | 30.0 | 30.0 | — | +0.0 |" in text
    assert "| warm (3) | Model (served default) | linear | 35.0 | 35.0 | 35.0 | +5.0▲ | +5.0▲ |" in text
    assert "w = 0.00 fitted on 4 held-out click" in text
    (tmp_path / QUICK_RUN).write_text(json.dumps(record()))
    assert NOT_MEASURED in quick_run_cold_start(Sources(tmp_path))


def _documented_commands() -> list[str]:
    """Every ``deepsent COMMAND ...`` code span of the README and ARCHITECTURE.md."""
    spans = []
    for doc in ("README.md", "docs/ARCHITECTURE.md"):
        spans += re.findall(r"`(deepsent [a-z]+[^`]*)`", (ROOT / doc).read_text(encoding="utf-8"))
    return spans


def test_every_documented_flag_is_a_flag_of_its_command() -> None:
    from deepsent.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    checked = 0
    for span in _documented_commands():
        name = span.split()[1]
        assert name in commands, span
        known = {option for action in commands[name]._actions for option in action.option_strings}
        flags = re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", span)
        assert set(flags) <= known, (span, sorted(set(flags) - known))
        checked += len(flags)
    assert checked > 50  # the commands table of ARCHITECTURE.md and the README's examples were read


def test_stage_times_are_listed_in_the_order_the_stages_ran(tmp_path: Path) -> None:
    (tmp_path / QUICK_RUN).parent.mkdir(parents=True)
    timings = {"compare": 9.0, "simulate": 1.5, "train lstm n=4": 60.0, "train dssm n=4": 30.0, "ingest": 2.0}
    (tmp_path / QUICK_RUN).write_text(json.dumps({**record(), "timings": timings}))  # a record without stage_order
    text = " ".join(quick_run_when(Sources(tmp_path)).split())
    assert "simulate 1.5 s, ingest 2.0 s, train dssm n=4 30.0 s, train lstm n=4 60.0 s, compare 9.0 s." in text
    order = ["simulate", "ingest", "train lstm n=4", "train dssm n=4", "compare"]
    (tmp_path / QUICK_RUN).write_text(json.dumps({**record(), "timings": timings, "stage_order": order}))
    text = " ".join(quick_run_when(Sources(tmp_path)).split())
    assert "simulate 1.5 s, ingest 2.0 s, train lstm n=4 60.0 s, train dssm n=4 30.0 s, compare 9.0 s." in text
    assert "the job took 1.5 min" in text and "commit abc1234, 2 cores" in text


def test_suite_from_copies_the_report_make_test_writes_and_refuses_another_file(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.suite_report import report

    written = repo / "suite-report.json"
    written.write_text(json.dumps(report(workers=3)))  # what infra/test.sh's run writes (tests/suite_report.py)
    assert main(["--root", str(repo), "--suite-from", str(written)]) == 0
    assert json.loads((repo / SUITE).read_text())["workers"] == 3
    assert NOT_MEASURED not in (repo / "README.md").read_text().split("suite:begin")[1]
    assert main(["--root", str(repo), "--check"]) == 0
    (repo / "other.json").write_text(json.dumps({"date": "2026-11-26"}))
    with pytest.raises(SystemExit, match="other.json: not a report of the test suite"):
        main(["--root", str(repo), "--suite-from", str(repo / "other.json")])
