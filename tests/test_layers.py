"""The folder tree is the data flow: imports only run down the layers, no module imports itself round a circle.

Every ``import`` counts, lazy ones inside functions too (a lazy import is still a dependency). The layers,
lowest first, are :data:`LAYERS`; a module may import its own layer and those below it.

Each folder of library code holds one kind of code. Whether two modules are of one kind is a judgement no test
makes; what the tests check is what keeps that judgement written down and in sight, and nothing more:

* every folder's ``__init__`` opens with a docstring whose first line names the kind it holds, a line no other
  folder shares (a placeholder such as "deepsent package." cannot stand for two folders);
* no module is longer than :data:`MAX_LINES`, so a second kind cannot grow unseen inside one module;
* a folder's place in the order is its entry in :data:`LAYERS` (a sub-folder not listed shares its parent's):
  a new folder of ``pipeline/`` or ``encoders/`` belongs to no layer, and fails, until it is placed there.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "encoders", "eval", "infra", "deepsent", "docs_render")
#: Lowest first. Inside a layer, modules may import each other (without circles). The docs' renderer reads the
#: chain, so it sits above everything; its marker style and splice (``docs_render.markers``) import nothing of the
#: project and sit below everything, so any layer may splice a block into a doc. The CLI's commands and the HTTP server
#: sit above the rest of ``deepsent``: the chain never calls back into a command.
LAYERS = (
    "docs_render.markers",
    "pipeline.core", "pipeline.text", "pipeline.storage", "pipeline.runtime",
    "pipeline.ingest", "pipeline.simulate", "pipeline.features",
    "encoders.towers", "encoders.model", "encoders.search", "encoders.analysis", "encoders.training",
    "eval", "infra", "deepsent", "deepsent.server", "deepsent.commands", "docs_render",
)
#: The most lines one module of library code may have.
MAX_LINES = 300


def module_files(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every ``*.py`` under ``packages`` (a package is its ``__init__``)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module that ``import name`` loads (its longest known prefix), or None for a library."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules that module ``name`` imports anywhere in its file (``from pkg import mod`` is ``pkg.mod``)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(filter(None, (_resolve(alias.name, modules) for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")[: len(name.split(".")) - node.level + is_package]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else _resolve(base, modules)
                if target:
                    found.add(target)
    found.discard(name)
    return found


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    modules = module_files(root, packages)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_of(module: str, layers: tuple[str, ...] = LAYERS) -> int | None:
    """Position of the layer ``module`` belongs to (its longest matching layer), or None."""
    matches = [layer for layer in layers if module == layer or module.startswith(layer + ".")]
    return layers.index(max(matches, key=len)) if matches else None


def upward_imports(graph: dict[str, set[str]], layers: tuple[str, ...] = LAYERS) -> list[str]:
    """``a -> b`` for every import of a module from a higher layer than its own."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = layer_of(module, layers), layer_of(target, layers)
            if low is not None and high is not None and high > low:
                found.append(f"{module} -> {target}")
    return found


def test_no_import_circle() -> None:
    assert circles(import_graph(ROOT)) == []


def test_imports_only_run_down_the_layers() -> None:
    graph = import_graph(ROOT)
    assert all(layer_of(module) is not None for module in graph if "." in module), \
        [m for m in graph if "." in m and layer_of(m) is None]
    assert upward_imports(graph) == []


def test_nothing_imports_the_dags() -> None:
    dag_modules = {path.stem for path in (ROOT / "dags").glob("*.py")}
    graph = import_graph(ROOT)
    for module, path in module_files(ROOT).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        names |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
        assert not names & (dag_modules | {"dags"}), f"{module} imports a DAG file"
    assert graph  # the walk saw the project


def library_folders(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    """Every folder of library code: each package and its sub-folders (``__pycache__`` aside)."""
    return [folder for package in packages
            for folder in [root / package, *sorted(p for p in (root / package).rglob("*")
                                                   if p.is_dir() and "__pycache__" not in p.parts)]]


def kind_of(folder: Path) -> str:
    """The kind a folder says it holds: the first line of its ``__init__``'s docstring ("" when it has none)."""
    init = folder / "__init__.py"
    if not init.is_file():
        return ""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"), filename=str(init)), clean=False) or ""
    return doc.split("\n", 1)[0].strip()


def kind_faults(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Folders that name no kind, and folders that name the kind another folder names."""
    faults, named = [], {}
    for folder in library_folders(root, packages):
        where, kind = folder.relative_to(root).as_posix(), kind_of(folder)
        if not kind:
            faults.append(f"{where}: its __init__.py names no kind (a docstring's first line)")
        elif kind in named:
            faults.append(f"{where}: names the kind of {named[kind]} ({kind!r})")
        named.setdefault(kind, where)
    return faults


def long_modules(root: Path, packages: tuple[str, ...] = PACKAGES, max_lines: int = MAX_LINES) -> list[str]:
    """``path (N lines)`` for every module of library code over ``max_lines``."""
    lengths = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in module_files(root, packages).values()}
    return [f"{path.relative_to(root).as_posix()} ({n} lines)" for path, n in sorted(lengths.items()) if n > max_lines]


def test_every_folder_names_its_one_kind() -> None:
    faults = kind_faults(ROOT)
    assert not faults, "; ".join(faults)


def test_no_module_is_over_max_lines() -> None:
    offenders = long_modules(ROOT)
    assert not offenders, f"over {MAX_LINES} lines (split them by concept): {', '.join(offenders)}"


def test_the_checks_find_a_circle_and_an_upward_import(tmp_path: Path) -> None:
    """The checks above can fail: a made-up project with one circle and one upward import."""
    for name, text in {
        "low/__init__.py": "", "low/a.py": "from low import b\n", "low/b.py": "def f():\n    import low.a\n",
        "low/c.py": "from high.d import X\n", "high/__init__.py": "", "high/d.py": "from ..low import c\nX = 1\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path, ("low", "high"))
    assert circles(graph) == [["high.d", "low.c"], ["low.a", "low.b"]]
    assert upward_imports(graph, ("low", "high")) == ["low.c -> high.d"]


def test_the_checks_find_a_folder_without_its_kind_and_a_long_module(tmp_path: Path) -> None:
    """The folder checks can fail: no docstring, a kind two folders share, a module one line too long."""
    for name, text in {
        "low/__init__.py": '"""Readers."""\n', "low/a.py": "x = 1\n" * MAX_LINES, "low/none/__init__.py": "",
        "high/__init__.py": '"""Readers."""\n', "high/b.py": "x = 1\n" * (MAX_LINES + 1),
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert kind_faults(tmp_path, ("low", "high")) == [
        "low/none: its __init__.py names no kind (a docstring's first line)",
        "high: names the kind of low ('Readers.')",
    ]
    assert long_modules(tmp_path, ("low", "high")) == [f"high/b.py ({MAX_LINES + 1} lines)"]
