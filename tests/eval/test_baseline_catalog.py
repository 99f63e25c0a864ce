"""The baseline catalog: one declaration per baseline, read without importing it, and every front door agrees."""
from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from deepsent.cli import build_parser
from deepsent.profiles import PROFILES
from eval.baseline_catalog import baseline_names, baselines, profile_baselines
from eval.compare import resolve_baselines

ROOT = Path(__file__).resolve().parents[2]


def test_the_catalog_reads_what_each_module_declares() -> None:
    assert baseline_names() == ["bm25", "ulm", "plsa", "doc2vec", "skipthought", "random", "minilm", "linear", "rrf"]
    for name, spec in baselines().items():
        module = importlib.import_module(spec.module)
        assert dataclasses.replace(module.SPEC, module=spec.module) == spec, name
        assert hasattr(module, spec.cls), f"{name}: {spec.module} has no class {spec.cls}"
    assert [n for n, s in baselines().items() if s.reference] == ["bm25", "ulm", "plsa", "doc2vec", "skipthought"]
    assert [n for n, s in baselines().items() if s.floor] == ["random"]


def test_reading_the_catalog_imports_no_baseline() -> None:
    code = ("import sys, eval.baseline_catalog as c; c.baselines(); "
            "print(sorted(m for m in sys.modules if m.startswith('eval.baselines') or m in ('torch', 'gensim', 'bm25s')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_dag_and_profiles_derive_from_the_catalog(dag_params: ModuleType) -> None:
    compare = build_parser()._subparsers._group_actions[0].choices["compare"]  # noqa: SLF001
    help_text = next(a.help for a in compare._actions if a.dest == "baselines")
    assert f"default {','.join(baseline_names())};" in help_text
    assert dag_params.BASELINES == baseline_names()
    assert PROFILES["quick"].baselines == profile_baselines("quick") == (
        "bm25", "ulm", "plsa:topics=100", "doc2vec:epochs=10", "skipthought:profile=quick", "random", "minilm", "linear", "rrf")
    assert PROFILES["full"].baselines == profile_baselines("full") == (
        "bm25", "ulm", "plsa:topics=500", "doc2vec", "skipthought:profile=full", "random", "minilm", "linear", "rrf")


def test_the_table_labels_come_from_the_catalog() -> None:
    scorers, unavailable = resolve_baselines(["bm25", "plsa:topics=100", "random"])
    assert [label for _, label, _ in scorers] == ["BM25", "PLSA (topics=100)", "Random order"]
    assert unavailable == {}
