"""Plots by pixel content, cost curves from real MLflow history, the HTML report in the store, MLflow
and headless Chromium, and the ``deepsent analyze`` command."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from encoders.analysis.plots import cost_curve_figure, cost_curves, cost_history, gate_heatmaps, heatmap_figure
from encoders.analysis.report import Example, analyze, default_examples
from encoders.analysis.traces import activation_trace, detect_keywords
from encoders.towers.twotower import TwoTowerModel
from encoders.training.trainer import TrainConfig, train
from pipeline.core.config import Settings
from pipeline.core.errors import DeepsentError
from pipeline.features.feature_files import latest_version
from pipeline.features.trigram import TrigramVocab
from pipeline.storage.store import Store

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _pixels(png: bytes) -> tuple[int, float]:
    """(distinct colours, share of non-white pixels) of a PNG."""
    from PIL import Image

    image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
    return len(np.unique(image, axis=0)), float((image.min(axis=1) < 245).mean())


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, tiny_features_store: Path,
           mlflow_db_template: Path) -> dict[str, Any]:
    """Settings on a fresh store, a small LSTM and RNN trained 4 epochs by the real trainer and logged to MLflow."""
    root = tmp_path_factory.mktemp("analysis")
    for folder in ("features", "pairs"):
        shutil.copytree(tiny_features_store / folder, root / "store" / folder)
    shutil.copyfile(mlflow_db_template, root / "mlflow.db")
    settings = Settings(store=str(root / "store"), data_dir=data_dir, mlflow_tracking_uri=f"sqlite:///{root / 'mlflow.db'}",
                        dask_workers=1, device="cpu")
    runs = {model: train(settings, TrainConfig(model=model, tower=tower, epochs=4, batch_size=32, seed=5,
                                               threads=1, register=False))
            for model, tower in (("lstm", {"ncell": 16}), ("rnn", {"nhid": 16}))}
    vocab = TrigramVocab.load(Store.from_settings(settings), f"features/{latest_version(Store.from_settings(settings))}/vocab.json")
    return {"settings": settings, "vocab": vocab, "root": root, **runs}


def test_heatmaps_draw_real_words_on_one_colour_scale(logged: dict[str, Any]) -> None:
    model = TwoTowerModel("lstm", logged["vocab"].size, {"ncell": 16})
    trace = activation_trace(model, logged["vocab"], "cordless drill with 2 batteries", side="doc")
    found = detect_keywords(trace.forward["y"], top=10)
    fig = heatmap_figure(trace, found)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert [im.get_array().shape for im in images] == [(16, 5)] * 4 + [(10, 5)]  # cells x words, no padding
    assert len({im.get_clim() for im in images}) == 1  # one colour scale for every panel
    low, high = images[0].get_clim()
    assert low == pytest.approx(min(trace.forward[g].min() for g in "icoy"))
    assert high == pytest.approx(max(trace.forward[g].max() for g in "icoy"))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == list(trace.words)
    colours, inked = _pixels(gate_heatmaps(trace, found))
    assert colours > 50 and inked > 0.3, (colours, inked)
    long = activation_trace(model, logged["vocab"], "hampton bay 3-piece patio set with beige seat cushions and glass top table")
    fig = heatmap_figure(long, detect_keywords(long.forward["y"]))  # drawn as two rows of panels
    assert [ax.images[0].get_array().shape for ax in fig.axes if ax.images] == [(16, 13)] * 4 + [(10, 13)]


def test_cost_curves_come_from_mlflow_history(logged: dict[str, Any]) -> None:
    settings = logged["settings"]
    lstm_run, rnn_run = (logged[k].model_uri.split("/")[1] for k in ("lstm", "rnn"))
    label, points = cost_history(lstm_run, settings)
    assert label.startswith("LSTM (ncell=16)") and [p[0] for p in points] == [1, 2, 3, 4]
    assert points[-1][1] < points[0][1]  # the real training cost went down
    fig = cost_curve_figure([cost_history(r, settings) for r in (lstm_run, rnn_run)])
    assert fig.axes[0].get_yscale() == "log" and len(fig.axes[0].lines) == 2
    colours, inked = _pixels(cost_curves([lstm_run, rnn_run], settings))
    assert colours > 20 and inked > 0.02
    with pytest.raises(DeepsentError, match="not found"):
        cost_curves(["0" * 32], settings)


def _chromium_check(url: str, shot: Path) -> dict[str, Any]:
    """Open ``url`` in headless Chromium: errors seen, image sizes, and a full-page screenshot."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found: run `bash infra/install-chromium.sh` (CI installs it)")
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url, wait_until="load")
            images = page.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    return {"errors": errors, "images": images}


def test_report_in_store_mlflow_and_chromium(logged: dict[str, Any], tmp_path: Path) -> None:
    settings = logged["settings"]
    result = analyze(settings, logged["lstm"].model_uri, compare_uri=logged["rnn"].model_uri, example_count=1)
    store = Store.from_settings(settings)
    run_id = logged["lstm"].model_uri.split("/")[1]
    assert result["report_uri"] == store.uri(f"reports/analysis/{run_id}/index.html")
    page = store.read_bytes(f"reports/analysis/{run_id}/index.html")
    # a dev query with its best and worst title; LSTM and RNN tables side by side
    (example,) = default_examples(settings, 1)
    (entry,) = result["examples"]
    assert [t["text"] for t in entry["texts"]] == [example.query] + [t for t, _ in example.titles]
    assert [t["side"] for t in entry["texts"]] == ["query", "doc", "doc"]
    assert "relevant title (grade 3" in example.titles[0][1] and "irrelevant title (grade 0" in example.titles[1][1]
    for text in entry["texts"]:
        tables = list(text["keyword_tables"].values())
        assert len(tables) == 2 and tables[0]["words"] == text["text"].split()
        assert len(tables[0]["left_to_right"]) == len(tables[0]["words"]) and tables[0]["left_to_right"][0] is None
    assert len(result["topics"]["queries"]) == 40 and result["topic_summary"]
    # the same bytes as an MLflow artifact of the model's run
    import mlflow.artifacts

    local = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="analysis/index.html",
                                                dst_path=str(tmp_path / "dl"), tracking_uri=settings.mlflow_tracking_uri)
    assert Path(local).read_bytes() == page
    assert page.count(b"<img ") == 3 + 1  # 3 gate figures + the cost curves
    # the page opens in headless Chromium without errors and shows every image
    seen = _chromium_check(Path(result["report_uri"]).as_uri(), tmp_path / "report.png")
    assert seen["errors"] == []
    assert len(seen["images"]) == 4 and all(done and w > 0 and h > 0 for done, w, h in seen["images"])
    colours, inked = _pixels((tmp_path / "report.png").read_bytes())
    assert colours > 100 and inked > 0.1


def test_report_written_to_an_s3_store(logged: dict[str, Any], s3_settings: Settings) -> None:
    settings = s3_settings.with_overrides(mlflow_tracking_uri=logged["settings"].mlflow_tracking_uri)
    examples = [Example("cordless drill", (("dewalt 20v cordless drill kit", "title 1"),))]
    store = Store.from_settings(settings)
    result = analyze(settings, logged["lstm"].model_uri, examples, topic_queries=["cordless drill", "led bulb 60w"])
    assert result["report_uri"].startswith(settings.store + "/reports/analysis/")
    first = {f: store.read_bytes(f"{result['report_uri'].rsplit('/', 1)[0]}/{f}") for f in result["files"]}
    page = first["index.html"].decode("utf-8")
    assert page.count("<img ") == 2 + 1 and "dewalt 20v cordless drill kit" in page
    # a re-run rewrites the same bytes and leaves no other file
    again = analyze(settings, logged["lstm"].model_uri, examples, topic_queries=["cordless drill", "led bulb 60w"])
    prefix = again["report_uri"].rsplit("/", 1)[0]
    assert {f: store.read_bytes(f"{prefix}/{f}") for f in again["files"]} == first
    assert sorted(store.list_files(prefix)) == sorted(f"{store.relpath(prefix)}/{f}" for f in first)


def test_cli_prints_one_json_object(logged: dict[str, Any], capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from deepsent.cli import main

    settings = logged["settings"]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
    run_id = logged["rnn"].model_uri.split("/")[1]
    argv = ["analyze", "--model-uri", run_id, "--query", "Patio Heater", "--title", "outdoor propane patio heater",
            "--title", "white ceiling paint", "--topic-query", "patio heater", "--store", settings.store, "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["run_id"] == run_id and out["report_uri"].endswith(f"reports/analysis/{run_id}/index.html")
    texts = out["examples"][0]["texts"]
    assert [t["text"] for t in texts] == ["Patio Heater", "outdoor propane patio heater", "white ceiling paint"]
    assert main(["analyze", "--model-uri", run_id, "--query", "patio heater", "--store", settings.store, "--json"]) == 2
    assert "has no --title" in json.loads(capsys.readouterr().out)["error"]
