"""Render every figure of the docs from the JSON a run or a benchmark wrote; ``--check`` fails when a doc is stale.

A block of a doc lies between ``<!-- NAME:begin (python -m docs_render writes this) -->`` and
``<!-- NAME:end -->`` (:mod:`docs_render.markers`, the one splice); NAME is one of the renderers of
:mod:`docs_render.run_blocks` (the main job's record ``docs/results/quick-run.json``, the suite's
``docs/results/suite.json``, the chain of ``deepsent/chain.py``, the screenshots' manifest),
:mod:`docs_render.bench_blocks` and :mod:`docs_render.gpu_blocks` (``bench/results/*.json``,
``docs/results/table-iv.csv``) and :mod:`docs_render.scaling` (docs/SCALING.md's table). Everything outside
the blocks is left as it is, and the prose of :data:`PROSE` must hold no figure typed by hand (:func:`hand_typed`).

    .venv/bin/python -m docs_render [--from-store STORE] [--suite-from REPORT] [--check] [--root ROOT]

``--from-store STORE`` first copies ``STORE/reports/latest/run.json`` (what ``deepsent run --profile quick``
wrote) to ``docs/results/quick-run.json``, after checking it is one.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from functools import partial
from pathlib import Path

from docs_render import markers
from docs_render.bench_blocks import BLOCKS as BENCH_BLOCKS
from docs_render.gpu_blocks import BLOCKS as GPU_BLOCKS
from docs_render.run_blocks import BLOCKS as RUN_BLOCKS
from docs_render.run_blocks import QUICK_RUN, SUITE, Sources
from docs_render.scaling import BLOCKS as SCALING_BLOCKS
from docs_render.screenshot_block import BLOCKS as SCREENSHOT_BLOCKS
from docs_render.serving_blocks import BLOCKS as SERVING_BLOCKS

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = {**RUN_BLOCKS, **BENCH_BLOCKS, **GPU_BLOCKS, **SCALING_BLOCKS, **SERVING_BLOCKS, **SCREENSHOT_BLOCKS}
#: The docs whose prose :func:`hand_typed` checks.
PROSE = ("README.md", "docs/RESULTS.md", "docs/ARCHITECTURE.md", "docs/GPU.md")
#: The docs whose blocks this command writes.
DOCS = (*PROSE, "docs/SCALING.md", "docs/screenshots/README.md")

#: A figure: a decimal number (a three-part version such as 2.13.0 is not one), or a number with a unit of
#: time, a percentage or a ratio.
FIGURE = re.compile(r"(?<![\w.])\d+\.\d+(?!\.?\d)|(?<![\w.])\d[\d,]*\s?(?:ms|s|min|minutes?|seconds?|hours?|h|%|×)(?!\w)")
#: What may stand outside a block although it looks like a figure: a named version, the significance level,
#: the confidence level, and a setting written ``name = value`` with one of the recipe's names (not a fitted
#: weight such as ``w``).
ALLOWED = re.compile(r"\b(?:Python|Airflow|torch|PyTorch|MLflow|faiss|Dask) \d+\.\d+|p < 0\.05|95 ?%\s+(?:bootstrap\s+)?CI"
                     r"|(?<!\w)(?:ncell|n|k|k1|b|mu|μ|γ|gamma|ε|th_G|T|win|nhid|seed) ?= ?\d+(?:\.\d+)?")
#: What the check does not read: rendered blocks, HTML comments, fenced code, code spans and link targets.
UNREAD = re.compile(r"<!-- ([a-z0-9-]+):begin .*?<!-- \1:end -->|<!--.*?-->|^```.*?^```|`[^`\n]+`|\]\([^)\s]+\)",
                    re.S | re.M)


def render(text: str, sources: Sources, doc: str) -> tuple[str, list[str]]:
    """``text`` with every block rendered anew, and the names of the blocks whose text changed."""
    return markers.splice(text, {name: partial(block, sources) for name, block in BLOCKS.items()}, doc)


def hand_typed(text: str) -> list[tuple[int, str]]:
    """(line number, figure) of every figure outside the rendered blocks, code and the allowance."""
    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    prose = UNREAD.sub(blank, text)
    prose = ALLOWED.sub(blank, prose)
    return [(prose.count("\n", 0, m.start()) + 1, m.group(0)) for m in FIGURE.finditer(prose)]


def from_store(store: Path, root: Path) -> Path:
    """Copy the main job's record of ``store`` to ``docs/results/quick-run.json`` after checking it is a quick run's."""
    source = store / "reports" / "latest" / "run.json"
    if not source.exists():
        raise SystemExit(f"{source}: not found; run `deepsent run --profile quick` on that store first")
    record = json.loads(source.read_text(encoding="utf-8"))
    missing = [k for k in ("date", "commit", "profile", "seconds", "timings", "table", "served_search", "ship", "promotion")
               if k not in record]
    if missing or not record["table"].get("rows") or not record["served_search"].get("rows"):
        raise SystemExit(f"{source}: not a record of the main job (missing {', '.join(missing) or 'table rows'})")
    if record["profile"] != "quick":
        raise SystemExit(f"{source}: a run of profile {record['profile']!r}; the README shows the quick profile's")
    target = root / QUICK_RUN
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"copied {source} (run of {record['date']}, commit {record['commit']}) to {target}")
    return target


def suite_from(report: Path, root: Path) -> Path:
    """Copy the suite's report (``infra/test.sh`` writes ``.deepsent/suite-report.json``) to ``docs/results/suite.json``."""
    if not report.exists():
        raise SystemExit(f"{report}: not found; run `make test` first (infra/test.sh writes it)")
    record = json.loads(report.read_text(encoding="utf-8"))
    missing = [k for k in ("date", "commit", "passed", "skipped", "failed", "pytest_seconds", "workers", "slowest")
               if k not in record]
    if missing:
        raise SystemExit(f"{report}: not a report of the test suite (missing {', '.join(missing)})")
    target = root / SUITE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"copied {report} (suite of {record['date']}, commit {record['commit']}) to {target}")
    return target


def main(argv: list[str] | None = None) -> int:
    """Render every doc's blocks (or, with ``--check``, report the stale ones and hand-typed figures; exit 1)."""
    parser = argparse.ArgumentParser(prog="python -m docs_render", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository whose docs and JSON are read")
    parser.add_argument("--from-store", type=Path, help="copy STORE/reports/latest/run.json to " + QUICK_RUN + " first")
    parser.add_argument("--suite-from", type=Path, help="copy the suite's report (make test writes "
                        ".deepsent/suite-report.json) to " + SUITE + " first")
    parser.add_argument("--check", action="store_true", help="exit 1 when a block is out of date with its JSON "
                        "or a figure is typed by hand outside the blocks")
    args = parser.parse_args(argv)
    if (args.from_store or args.suite_from) and args.check:
        parser.error("--from-store and --suite-from write; run them without --check")
    if args.from_store:
        from_store(args.from_store, args.root)
    if args.suite_from:
        suite_from(args.suite_from, args.root)
    sources, failures = Sources(args.root), []
    for doc in DOCS:
        path = args.root / doc
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        updated, stale = render(text, sources, doc)
        if args.check:
            failures += [f"{doc}: block {name!r} is out of date with its JSON: run python -m docs_render" for name in stale]
            failures += [f"{doc}:{line}: {figure!r} typed by hand: render it from a JSON (python -m docs_render) or "
                         "quote a command in a code span" for line, figure in (hand_typed(text) if doc in PROSE else [])]
        elif updated != text:
            path.write_text(updated, encoding="utf-8")
            print(f"{doc}: rendered {', '.join(stale)}")
    for failure in failures:
        print(failure, file=sys.stderr)
    if args.check and not failures:
        print("every doc is up to date with its JSON")
    return 1 if failures else 0
