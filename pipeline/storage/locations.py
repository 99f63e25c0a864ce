"""Where each dataset of the chain lives in the store: the one table of store locations.

Every module that reads or writes a dataset takes its folder from :data:`LOCATIONS` (``folder("clicks")``), and the
chain's dataset records (``deepsent.datasets``) name the same datasets; :func:`dataset_of` tells which dataset a
store path belongs to (a recording of a run's store accesses is checked against what each stage declares). Datasets
kept by MLflow (the grid's models, the ensemble, the champion) have no store folder. :data:`WORKING` are the store's
folders that hold no dataset: a stage's own working files, read back by that stage only.
"""
from __future__ import annotations

from fnmatch import fnmatchcase

#: The folder of every report: ``reports/<run>/`` of each run, ``reports/latest/`` of the last.
REPORTS_ROOT = "reports"
#: Dataset -> the store paths it lives under (the first is its own folder); a ``*`` pattern tells files apart by name
#: (the first dataset that matches a path owns it, after the working folders).
LOCATIONS: dict[str, tuple[str, ...]] = {
    "landing": ("landing/clicks", "landing/catalog"),
    "clicks": ("clicks", "quarantine/ingest"),
    "catalog": ("catalog", "quarantine/catalog"),
    "pairs": ("pairs", "skipped"),
    "features": ("features", "quarantine/featurize"),
    "mined": ("mined",),
    "click_lists": ("click_lists", "quarantine/click-lists"),
    "vectors": ("vectors",),
    "index": ("indexes",),
    "latest": (f"{REPORTS_ROOT}/latest",),
    "served_report": (f"{REPORTS_ROOT}/*/retrieval.*",),
    "table": (f"{REPORTS_ROOT}/*",),  # a run's other report files: table.{md,html,csv}, ndcg.png, per-query NDCG
}
#: Datasets that are also a cache any stage may read and add to: the vector store is keyed by model part and text, so
#: a stage that encodes texts (the judged titles, the decision set's) reads their vectors there first and stores the
#: new ones; the encode stage is the one that writes it for the whole corpus.
CACHES = frozenset({"vectors"})
#: Store folders that hold no dataset: each is one stage's (or one command's) working files.
WORKING: dict[str, str] = {
    "checkpoints": "training checkpoints, read back by a resumed training run",
    "cache/baselines": "the baselines' fits, keyed by their inputs, read back by the next comparison",
    "search": "deepsent search's query results (a command's output, no stage's)",
    f"{REPORTS_ROOT}/analysis": "deepsent analyze's report (a command's output, no stage's)",
}


def folder(dataset: str) -> str:
    """The store folder of ``dataset`` (its first location)."""
    return LOCATIONS[dataset][0]


def working(name: str) -> str:
    """The working folder ``name``, as the table lists it (a KeyError for a folder it does not list)."""
    if name not in WORKING:
        raise KeyError(f"{name!r} is not a working folder of the store ({', '.join(WORKING)})")
    return name


def report_file(run: str, name: str) -> str:
    """The store path of file ``name`` of report ``run`` (``reports/<run>/<name>``: the table's, the served search's,
    ``latest``'s)."""
    return f"{REPORTS_ROOT}/{run}/{name}"


def _under(relpath: str, location: str) -> bool:
    if "*" in location:
        return fnmatchcase(relpath, location)
    return relpath == location or relpath.startswith(location + "/")


def dataset_of(relpath: str) -> str | None:
    """The dataset the store path ``relpath`` belongs to; ``"working"`` for a working folder's; None for neither."""
    relpath = relpath.strip("/")
    if any(_under(relpath, location) for location in WORKING):
        return "working"
    return next((name for name, locations in LOCATIONS.items() if any(_under(relpath, at) for at in locations)), None)
