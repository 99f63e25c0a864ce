"""The main job's record: its result as JSON in ``reports/latest/run.json``, the source of the docs' figures.

``python -m docs_render --from-store STORE`` copies it to ``docs/results/quick-run.json`` and renders the README's
and docs/RESULTS.md's tables from it, so no figure of a run is typed by hand. It holds what the job printed
(stage timings, counts, the served-search rows, the comparison rows with their figures and marks, the
ship choice, the promotion decision) with the commit and the date; the store's and the data's folders are
written as ``<store>`` and ``<data>``, so two runs of one commit differ only in timings, dates and MLflow's run
ids.
"""
from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path
from typing import Any

from pipeline.core.config import Settings
from pipeline.core.results import to_json_safe
from pipeline.storage.locations import folder

#: Where the job writes its record, in the store.
RUN_RECORD = f"{folder('latest')}/run.json"
#: The keys of the job's result that say where things are on this machine, not what the run measured.
LOCAL_KEYS = ("mlflow_ui", "summary", "search_example")
ROOT = Path(__file__).resolve().parents[1]


def source_commit(root: Path = ROOT) -> dict[str, Any]:
    """The short commit of the code that ran and whether tracked files differed from it; None without git."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=30).stdout

    try:
        return {"commit": git("rev-parse", "--short", "HEAD").strip(),
                "dirty": bool(git("status", "--porcelain", "--untracked-files=no").strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def _without_places(value: Any, places: dict[str, str]) -> Any:
    """``value`` with every mention of a local folder replaced by its placeholder (records compare across machines)."""
    if isinstance(value, dict):
        return {k: _without_places(v, places) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_places(v, places) for v in value]
    if isinstance(value, str):
        for folder, placeholder in places.items():
            value = value.replace(folder, placeholder)
    return value


def record(result: dict[str, Any], settings: Settings, today: dt.date | None = None) -> dict[str, Any]:
    """The JSON record of one run of the job (``result`` as :func:`deepsent.runner.run` returns it)."""
    kept = {k: v for k, v in result.items() if k not in LOCAL_KEYS}
    places = {settings.store.rstrip("/"): "<store>", str(settings.data_dir).rstrip("/"): "<data>"}
    return {"date": (today or dt.datetime.now(dt.timezone.utc).date()).isoformat(), **source_commit(),
            "cpu_count": os.cpu_count(), "stage_order": list(result.get("timings", {})),  # the JSON's keys are sorted
            **_without_places(to_json_safe(kept), places)}


def write_record(result: dict[str, Any], settings: Settings) -> str:
    """Write the run's record to ``reports/latest/run.json`` atomically; its URI."""
    from pipeline.storage.store import Store

    return Store.from_settings(settings).write_json(RUN_RECORD, record(result, settings))
