"""What each PNG of docs/screenshots shows: ``manifest.json`` beside them.

``infra/screenshots.py`` builds one entry per PNG it takes (pure functions here, from what the REST APIs
returned) and merges them into the folder's manifest; the block of its README between :data:`BEGIN` and
:data:`END` has one writer, ``python -m docs_render`` (``docs_render/screenshot_block.py``), which the screenshot
script runs after. ``tests/dags/test_screenshots_current.py`` compares the task ids of each grid entry with the DAG
as parsed now.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from docs_render import markers

MANIFEST = "manifest.json"
BLOCK = "screenshots"
BEGIN, END = markers.begin(BLOCK), markers.end(BLOCK)
#: the command that retakes the grid of each DAG (the index grid comes with the registry pages)
RETAKE = {"deepsent_retrain": ".venv/bin/python infra/screenshots.py",
          "deepsent_index": ".venv/bin/python infra/screenshots.py --promotion"}


def grid_entry(dag_id: str, run: Mapping[str, Any], task_instances: Iterable[Mapping[str, Any]],
               taken_at: str, commit: str) -> dict[str, Any]:
    """The entry of an Airflow grid: the DAG run (REST ``dagRuns/{id}``) and its task instances."""
    tasks = [{"task_id": ti["task_id"], "map_index": ti.get("map_index", -1), "state": ti.get("state"),
              "try_number": ti.get("try_number"), "start_date": ti.get("start_date"),
              "duration_s": None if ti.get("duration") is None else round(float(ti["duration"]), 1)}
             for ti in task_instances]
    tasks.sort(key=lambda t: (t["task_id"], t["map_index"]))
    return {"kind": "airflow-grid", "dag_id": dag_id, "run_id": run["dag_run_id"], "state": run.get("state"),
            "conf": run.get("conf") or {}, "start_date": run.get("start_date"), "end_date": run.get("end_date"),
            "task_ids": sorted({t["task_id"] for t in tasks}), "tasks": tasks, "taken_at": taken_at, "commit": commit}


def form_entry(dag_id: str, params: Iterable[str], taken_at: str, commit: str) -> dict[str, Any]:
    """The entry of a DAG's trigger form: the params it shows."""
    return {"kind": "airflow-trigger-form", "dag_id": dag_id, "params": sorted(params),
            "taken_at": taken_at, "commit": commit}


def experiment_entry(experiment: str, dag_run_id: str, runs: Iterable[Mapping[str, Any]], metrics: Iterable[str],
                     taken_at: str, commit: str) -> dict[str, Any]:
    """The entry of an MLflow experiment page filtered on a DAG run: its runs (REST ``runs/search``) and metrics."""
    wanted, shown = tuple(metrics), []
    for run in runs:
        values = {m["key"]: m["value"] for m in run.get("data", {}).get("metrics", [])}
        shown.append({"run_name": run["info"].get("run_name"), "status": run["info"].get("status"),
                      "metrics": {k: _number(values[k]) for k in wanted if k in values}})
    shown.sort(key=lambda r: r["run_name"] or "")
    return {"kind": "mlflow-experiment", "experiment": experiment, "dag_run_id": dag_run_id, "runs": shown,
            "taken_at": taken_at, "commit": commit}


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 4)


def registry_entry(model: str, versions: Iterable[Mapping[str, Any]], aliases: Mapping[str, str],
                   taken_at: str, commit: str, version: int | None = None) -> dict[str, Any]:
    """The entry of a registered model's page (``version`` None) or of one version's page, every tag kept."""
    by_version: dict[str, list[str]] = {}
    for alias, number in aliases.items():
        by_version.setdefault(str(number), []).append(alias)
    shown = []
    for v in versions:
        if version is not None and int(v["version"]) != version:
            continue
        tags = {t["key"]: t["value"] for t in v.get("tags", [])}
        shown.append({"version": int(v["version"]), "aliases": sorted(by_version.get(str(v["version"]), [])),
                      "tags": tags})
    shown.sort(key=lambda v: v["version"])
    return {"kind": "mlflow-registry", "model": model, "version": version, "versions": shown,
            "taken_at": taken_at, "commit": commit}


def serve_page_entry(path: str, served: Mapping[str, Any], taken_at: str, commit: str) -> dict[str, Any]:
    """The entry of a page of ``deepsent serve``: the path asked and what served it (its ``/readyz`` answer)."""
    return {"kind": "serve-page", "path": path, "model": served["model"], "model_uri": served["model_uri"],
            "version": served["version"], "build": served["build"], "titles": served["titles"],
            "default_mode": served["default_mode"], "taken_at": taken_at, "commit": commit}


def merge(old: Mapping[str, Any], new: Mapping[str, dict[str, Any]], present: Iterable[str]) -> dict[str, Any]:
    """``old`` with the entries of ``new`` (by PNG name) replacing its own; PNGs not ``present`` are dropped."""
    keep = set(present)
    shots = {**old.get("screenshots", {}), **new}
    return {"screenshots": {name: entry for name, entry in shots.items() if name in keep}}


def read(path: Path) -> dict[str, Any]:
    """The manifest at ``path`` (an empty one when there is none)."""
    return json.loads(path.read_text()) if path.exists() else {"screenshots": {}}


def write(path: Path, manifest: Mapping[str, Any]) -> None:
    """Write ``manifest`` to ``path`` atomically (a temporary file renamed over it), keys sorted."""
    _replace(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _replace(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record(out: Path, shots: Mapping[str, dict[str, Any]]) -> Path:
    """Merge ``shots`` (PNG name -> entry) into ``out``'s manifest, PNGs no longer there dropped (the README block is
    ``python -m docs_render``'s to render from it)."""
    path = out / MANIFEST
    write(path, merge(read(path), shots, present=[p.name for p in out.glob("*.png")]))
    return path


def git_commit(root: Path) -> str:
    """The commit checked out in ``root`` ("unknown" outside a git checkout)."""
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def task_drift(dag_id: str, shown: Iterable[str], parsed: Iterable[str]) -> str | None:
    """What differs between the tasks a screenshot shows and the DAG's (None if nothing), with the retake command."""
    missing, extra = sorted(set(parsed) - set(shown)), sorted(set(shown) - set(parsed))
    if not missing and not extra:
        return None
    return (f"the screenshot of {dag_id} is stale: tasks missing from it {missing}, tasks it shows that the DAG "
            f"no longer has {extra}; retake it on a stack with a fresh run (docs/screenshots/README.md): "
            f"{RETAKE.get(dag_id, RETAKE['deepsent_retrain'])}")
