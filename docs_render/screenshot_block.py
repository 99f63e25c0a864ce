"""The screenshots' README block (docs/screenshots/README.md): what each PNG shows, rendered from the manifest
``infra/screenshots.py`` wrote beside them (``infra/screenshot_manifest.py``). This is the block's one writer.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from docs_render.run_blocks import NOT_MEASURED, Sources

SCREENSHOTS = "docs/screenshots/manifest.json"


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


def screenshots(sources: Sources) -> str:
    """What each PNG of docs/screenshots shows, from the manifest the screenshot script wrote beside them."""
    shots = sources.json(SCREENSHOTS)
    return describe(shots) if shots is not None else f"The screenshots: {NOT_MEASURED} (no {SCREENSHOTS})."


BLOCKS: dict[str, Callable[[Sources], str]] = {"screenshots": screenshots}
