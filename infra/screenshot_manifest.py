"""What each PNG of docs/screenshots shows: ``manifest.json`` beside them, and the README block rendered from it.

``infra/screenshots.py`` builds one entry per PNG it takes (pure functions here, from what the REST APIs
returned), merges them into the folder's manifest and re-renders the block of its README between
:data:`BEGIN` and :data:`END` with the docs' one splice (``docs_render.markers``; ``python -m docs_render``
renders and checks the same block). ``tests/dags/test_screenshots_current.py`` compares the task ids of each
grid entry with the DAG as parsed now.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
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
    """Merge ``shots`` (PNG name -> entry) into ``out``'s manifest, PNGs no longer there dropped; re-render its README."""
    path = out / MANIFEST
    merged = merge(read(path), shots, present=[p.name for p in out.glob("*.png")])
    write(path, merged)
    if not update_readme(out / "README.md", merged):
        print(f"{out / 'README.md'}: no {BEGIN} ... {END} block to update", file=sys.stderr)
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


def _seconds(start: str | None, end: str | None) -> str:
    import datetime as dt

    if not start or not end:
        return "?"
    span = (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()
    return f"{int(span // 60)} min {span % 60:.0f} s" if span >= 60 else f"{span:.0f} s"


def _grid_lines(name: str, entry: Mapping[str, Any]) -> list[str]:
    conf = json.dumps(entry["conf"], sort_keys=True)
    lines = [f"`{name}`: DAG `{entry['dag_id']}`, run `{entry['run_id']}` ({entry['state']} in "
             f"{_seconds(entry.get('start_date'), entry.get('end_date'))}, conf `{conf}`), "
             f"{len(entry['task_ids'])} tasks:", "", "| task | state | try | duration (s) |", "|---|---|---|---|"]
    for t in sorted(entry["tasks"], key=lambda t: (t.get("start_date") or "~", t["task_id"], t["map_index"])):
        label = t["task_id"] + (f"[{t['map_index']}]" if t["map_index"] >= 0 else "")
        lines.append(f"| {label} | {t['state']} | {t['try_number']} | {t['duration_s']} |")
    return lines + [""]


def _registry_lines(name: str, entry: Mapping[str, Any]) -> list[str]:
    what = "its list of versions" if entry["version"] is None else f"version {entry['version']}'s page"
    lines = [f"`{name}`: registered model `{entry['model']}`, {what}:", "",
             "| version | aliases | decision | NDCG@1 / @3 / @10 | compared against | reason |", "|---|---|---|---|---|---|"]
    for v in entry["versions"]:
        tags = v["tags"]
        ndcg = " / ".join(tags.get(f"ndcg_at_{k}", "?") for k in (1, 3, 10))
        lines.append(f"| {v['version']} | {', '.join('@' + a for a in v['aliases']) or '—'} | "
                     f"{tags.get('deepsent.decision', '?')} | {ndcg} | {tags.get('deepsent.compared_against', '—')} | "
                     f"{tags.get('deepsent.reason', '')} |")
    return lines + [""]


def _experiment_lines(name: str, entry: Mapping[str, Any]) -> list[str]:
    metrics = sorted({k for r in entry["runs"] for k in r["metrics"]})
    lines = [f"`{name}`: MLflow experiment `{entry['experiment']}`, the {len(entry['runs'])} runs tagged "
             f"`airflow.dag_run_id` = `{entry['dag_run_id']}`:", "",
             "| run | status | " + " | ".join(metrics) + " |", "|---|---|" + "---|" * len(metrics)]
    for r in entry["runs"]:
        lines.append(f"| {r['run_name']} | {r['status']} | "
                     + " | ".join(str(r["metrics"].get(k, "—")) for k in metrics) + " |")
    return lines + [""]


def _form_lines(name: str, entry: Mapping[str, Any]) -> list[str]:
    params = ", ".join(f"`{p}`" for p in entry["params"])
    return [f"`{name}`: the trigger form of `{entry['dag_id']}`, {len(entry['params'])} params: {params}.", ""]


def _serve_page_lines(name: str, entry: Mapping[str, Any]) -> list[str]:
    return [f"`{name}`: the search page of `deepsent serve`, `GET {entry['path']}`, served by {entry['model']} "
            f"(`{entry['model_uri']}` version {entry['version']}, build `{entry['build']}`, "
            f"{entry['titles']:,} titles, default mode {entry['default_mode']}).", ""]


RENDER = {"airflow-grid": _grid_lines, "mlflow-registry": _registry_lines,
          "mlflow-experiment": _experiment_lines, "airflow-trigger-form": _form_lines, "serve-page": _serve_page_lines}


def describe(manifest: Mapping[str, Any]) -> str:
    """The README block's text: what every screenshot of ``manifest`` shows, in name order."""
    shots = manifest.get("screenshots", {})
    taken = sorted({(e["taken_at"][:10], e["commit"][:12]) for e in shots.values()})
    lines = ["Taken " + "; ".join(f"{day} at commit `{commit}`" for day, commit in taken)
             + " (facts below rendered from `manifest.json`).", ""]
    for name in sorted(shots):
        lines += RENDER[shots[name]["kind"]](name, shots[name])
    return "\n".join(lines)


def render(manifest: Mapping[str, Any]) -> str:
    """The README block describing every screenshot of ``manifest``, markers included."""
    return markers.block(BLOCK, describe(manifest))


def update_readme(path: Path, manifest: Mapping[str, Any]) -> bool:
    """Re-render the screenshots block of the README at ``path`` from ``manifest``; False if it has none."""
    text = path.read_text() if path.exists() else ""
    if BLOCK not in markers.names(text):
        return False
    _replace(path, markers.splice(text, {BLOCK: lambda: describe(manifest)}, str(path))[0])
    return True
