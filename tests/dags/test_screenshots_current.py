"""docs/screenshots show the DAGs as they are: the task ids of each grid screenshot (its manifest.json) against
the DAG parsed now, and the manifest writer (infra/screenshot_manifest.py) without a stack."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from docs_render import markers
from docs_render.screenshot_block import describe
from infra import screenshot_manifest as manifest
from pipeline.core.config import PROJECT_ROOT

SHOTS = PROJECT_ROOT / "docs" / "screenshots"


def _grid(dag_id: str) -> dict[str, Any]:
    shots = manifest.read(SHOTS / manifest.MANIFEST)["screenshots"]
    grids = [e for e in shots.values() if e["kind"] == "airflow-grid" and e["dag_id"] == dag_id]
    assert grids, (f"{SHOTS / manifest.MANIFEST} has no grid of {dag_id}; take it on a stack "
                   f"(docs/screenshots/README.md): {manifest.RETAKE[dag_id]}")
    return grids[0]


@pytest.mark.parametrize("dag_id", ["deepsent_retrain", "deepsent_index"])
def test_the_grid_screenshot_shows_the_tasks_the_dag_has_now(dagbag: Any, dag_id: str) -> None:
    shown = _grid(dag_id)
    assert (SHOTS / f"airflow-grid-{dag_id}.png").is_file()
    drift = manifest.task_drift(dag_id, shown["task_ids"], dagbag.get_dag(dag_id).task_ids)
    assert drift is None, drift


def test_the_screenshot_readme_block_is_the_rendering_of_the_manifest() -> None:
    readme = (SHOTS / "README.md").read_text()
    block = readme[readme.index(manifest.BEGIN):readme.index(manifest.END) + len(manifest.END)]
    rendered = markers.block(manifest.BLOCK, describe(manifest.read(SHOTS / manifest.MANIFEST)))
    assert block == rendered, "docs/screenshots/README.md's block is not rendered from manifest.json: run python -m docs_render"
    assert set(manifest.read(SHOTS / manifest.MANIFEST)["screenshots"]) == {p.name for p in SHOTS.glob("*.png")}


STAMP = {"taken_at": "2026-11-26T10:00:00+00:00", "commit": "0123456789abcdef"}
RUN = {"dag_run_id": "manual__1", "state": "success", "conf": {"epochs": 1},
       "start_date": "2026-11-26T09:58:00+00:00", "end_date": "2026-11-26T09:59:05+00:00"}


def _ti(task_id: str, map_index: int = -1, duration: float | None = 1.234) -> dict[str, Any]:
    return {"task_id": task_id, "map_index": map_index, "state": "success", "try_number": 1,
            "duration": duration, "start_date": f"2026-11-26T09:58:{len(task_id):02d}+00:00"}


def test_a_grid_entry_records_the_task_ids_it_is_given() -> None:
    tis = [_ti("train", 1), _ti("pairs"), _ti("train", 0), _ti("check_params", duration=None)]
    entry = manifest.grid_entry("deepsent_retrain", RUN, tis, **STAMP)

    assert entry["task_ids"] == ["check_params", "pairs", "train"]
    assert [(t["task_id"], t["map_index"]) for t in entry["tasks"]] == [
        ("check_params", -1), ("pairs", -1), ("train", 0), ("train", 1)]
    assert entry["tasks"][1]["duration_s"] == 1.2 and entry["tasks"][0]["duration_s"] is None
    assert (entry["dag_id"], entry["run_id"], entry["commit"]) == ("deepsent_retrain", "manual__1", STAMP["commit"])
    assert manifest.task_drift("deepsent_retrain", entry["task_ids"], ["check_params", "pairs", "train"]) is None


def test_a_drift_names_the_missing_and_extra_tasks_and_the_retake_command() -> None:
    drift = manifest.task_drift("deepsent_retrain", ["pairs", "pick_best"], ["pairs", "ship", "ensemble"])

    assert "missing from it ['ensemble', 'ship']" in drift and "no longer has ['pick_best']" in drift
    assert manifest.RETAKE["deepsent_retrain"] in drift


def test_the_manifest_is_merged_written_atomically_sorted_and_described(tmp_path: Path) -> None:
    for name in ("airflow-grid-deepsent_retrain.png", "mlflow-registry-deepsent-ranker.png"):
        (tmp_path / name).write_bytes(b"png")
    (tmp_path / "README.md").write_text(f"# Shots\n\n{manifest.BEGIN}\nold\n{manifest.END}\n\nafter\n")
    old = {"screenshots": {"mlflow-registry-deepsent-ranker-v2.png": {"kind": "mlflow-registry"}}}
    manifest.write(tmp_path / manifest.MANIFEST, old)  # v2's PNG is gone: its entry goes too
    versions = [{"version": "1", "tags": [{"key": "deepsent.decision", "value": "promoted"}, {"key": "ndcg_at_1", "value": "0.5"}]}]
    shots = {"airflow-grid-deepsent_retrain.png": manifest.grid_entry("deepsent_retrain", RUN, [_ti("pairs")], **STAMP),
             "mlflow-registry-deepsent-ranker.png": manifest.registry_entry(
                 "deepsent-ranker", versions, {"champion": "1"}, **STAMP)}

    path = manifest.record(tmp_path, shots)
    text = path.read_text()
    assert sorted(json.loads(text)["screenshots"]) == sorted(shots)
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    assert json.loads(text)["screenshots"]["mlflow-registry-deepsent-ranker.png"]["versions"] == [
        {"version": 1, "aliases": ["champion"], "tags": {"deepsent.decision": "promoted", "ndcg_at_1": "0.5"}}]
    assert (tmp_path / "README.md").read_text().count("old") == 1  # the README block is docs_render's alone
    readme = describe(json.loads(text))  # what python -m docs_render writes in it
    assert "| pairs | success | 1 | 1.2 |" in readme and "| 1 | @champion | promoted | 0.5 / ? / ? |" in readme
    assert "success in 1 min 5 s" in readme and "2026-11-26 at commit `0123456789ab`" in readme

    again = {"mlflow-registry-deepsent-ranker.png": shots["mlflow-registry-deepsent-ranker.png"]}
    merged = json.loads(manifest.record(tmp_path, again).read_text())["screenshots"]
    assert set(merged) == set(shots)  # retaking one screenshot keeps the others' entries
