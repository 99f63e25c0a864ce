"""Every import of the benchmarks and of the docs' renderer resolves, lazy ones inside functions too, and no module
edits ``sys.path``: a name that moved or vanished from the library fails here, not on the day a benchmark runs.

An import inside ``try: ... except ImportError`` is optional (a package deepsent does not depend on, such as ONNX
Runtime for one benchmark's rows): it may be absent here, but once its package is installed its names must resolve."""
from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = ("bench", "docs_render")


def module_name(root: Path, path: Path) -> str:
    """The dotted name of the module at ``path`` under ``root`` (a package is its ``__init__``)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolves(module: str, name: str | None = None) -> bool:
    """Whether ``module`` imports and, when ``name`` is given, has it as an attribute or a submodule."""
    try:
        loaded = importlib.import_module(module)
    except ImportError:
        return False
    if name is None or hasattr(loaded, name):
        return True
    return hasattr(loaded, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None


def _optional(tree: ast.AST) -> set[ast.AST]:
    """The import statements inside a ``try`` whose handlers catch ``ImportError`` (or ``ModuleNotFoundError``)."""
    found: set[ast.AST] = set()
    for node in ast.walk(tree):
        caught = [h.type for h in getattr(node, "handlers", []) if h.type is not None]
        caught += [element for c in caught for element in getattr(c, "elts", [])]  # except (ImportError, OSError)
        names = {getattr(c, "id", None) for c in caught}
        if isinstance(node, ast.Try) and names & {"ImportError", "ModuleNotFoundError"}:
            found |= {n for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return found


def dead_imports(root: Path, tree: str) -> list[str]:
    """``path:line: what`` for every import statement under ``root/tree`` that does not resolve, wherever it stands
    (an optional one only when its top-level package is installed)."""
    dead = []
    for path in sorted((root / tree).rglob("*.py")):
        name, is_package = module_name(root, path), path.name == "__init__.py"
        where = path.relative_to(root)
        parsed = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        optional = _optional(parsed)
        for node in ast.walk(parsed):
            if node in optional and not all(importlib.util.find_spec(top) for top in _top_levels(node)):
                continue
            if isinstance(node, ast.Import):
                dead += [f"{where}:{node.lineno}: import {a.name}" for a in node.names if not _resolves(a.name)]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = name.split(".")[: len(name.split(".")) - node.level + is_package]
                    base = ".".join(parent + ([node.module] if node.module else []))
                dead += [f"{where}:{node.lineno}: from {base} import {a.name}" for a in node.names
                         if a.name != "*" and not _resolves(base, a.name)]
    return dead


def _top_levels(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The top-level packages an absolute import statement loads (none for a relative one: that is the project)."""
    if isinstance(node, ast.ImportFrom):
        return [] if node.level else [(node.module or "").split(".")[0]]
    return [alias.name.split(".")[0] for alias in node.names]


def sys_path_edits(root: Path, tree: str) -> list[str]:
    """``path:line`` of every use of ``sys.path`` under ``root/tree``."""
    found = []
    for path in sorted((root / tree).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys":
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


@pytest.mark.parametrize("tree", TREES)
def test_every_module_imports(tree: str) -> None:
    modules = [module_name(ROOT, p) for p in sorted((ROOT / tree).rglob("*.py")) if p.name != "__main__.py"]
    assert len(modules) > 5
    for module in modules:
        importlib.import_module(module)


@pytest.mark.parametrize("tree", TREES)
def test_every_import_statement_resolves_lazy_ones_too(tree: str) -> None:
    assert dead_imports(ROOT, tree) == []


@pytest.mark.parametrize("tree", TREES)
def test_no_module_edits_sys_path(tree: str) -> None:
    assert sys_path_edits(ROOT, tree) == []


def test_the_checks_find_a_dead_lazy_import_and_a_sys_path_edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above can fail: a made-up benchmark importing, inside a function, a name its module no longer has."""
    for name, text in {
        "madeup_bench/__init__.py": "",
        "madeup_bench/stage.py": ("import sys\n\nsys.path.insert(0, '.')\n\n\ndef run():\n"
                                  "    from encoders.search.corpus_index import NO_SUCH_ROOT, index_root\n"
                                  "    from . import helper, gone\n    import encoders.search.no_such_module\n"),
        "madeup_bench/helper.py": "from pipeline.ingest.catalog.corpus import corpus_titles\n",
        "madeup_bench/optional.py": ("try:\n    import no_such_package_here\n    from numpy import no_such_name\n"
                                     "except (ModuleNotFoundError, OSError):\n    pass\n"
                                     "try:\n    from encoders.search.corpus_index import index_root, NO_SUCH_ROOT\n"
                                     "except ImportError:\n    pass\n"),
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert dead_imports(tmp_path, "madeup_bench") == [  # an optional import is skipped only while its package is absent
        "madeup_bench/optional.py:3: from numpy import no_such_name",
        "madeup_bench/optional.py:7: from encoders.search.corpus_index import NO_SUCH_ROOT",
        "madeup_bench/stage.py:7: from encoders.search.corpus_index import NO_SUCH_ROOT",
        "madeup_bench/stage.py:8: from madeup_bench import gone",
        "madeup_bench/stage.py:9: import encoders.search.no_such_module"]
    assert sys_path_edits(tmp_path, "madeup_bench") == ["madeup_bench/stage.py:3"]
