"""The main job's profiles, its choice of the best paper tower, and its end-of-job summary."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from deepsent.profiles import PROFILES, ModelSpec
from deepsent.runner import run, summary
from deepsent.stages import best_trained
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from tests.tiny_chain import TinyChain, copy_of


def test_full_profile_covers_the_table_iv_grid() -> None:
    specs = {(m.model, tuple(sorted(m.tower.items())), m.negatives) for m in PROFILES["full"].models}
    assert {("lstm", (("ncell", c),), 4) for c in (32, 64, 96)} <= specs
    assert {("lstm", (("ncell", 96),), n) for n in (2, 4, 6, 8)} <= specs
    assert {("clsm", (("win", w),), 4) for w in (1, 3, 5)} <= specs
    assert {m for m, _, _ in specs} == {"dssm", "clsm", "rnn", "lstm", "bilstm", "minilm"}
    assert "plsa:topics=500" in PROFILES["full"].baselines


def test_best_model_is_chosen_among_runs_with_the_same_negatives(make_train_result: Callable[..., TrainResult]) -> None:
    specs = (ModelSpec("lstm", {}, 4), ModelSpec("lstm", {}, 2), ModelSpec("dssm", {}, 4))
    trained = [make_train_result("a", 0.93, 0.3), make_train_result("b", 0.96, 0.3), make_train_result("c", 0.94, 0.3)]
    # b has the highest MRR only because it ranks among 3 candidates instead of 5
    assert best_trained(trained, specs).name == "c"
    # equal MRR: the lower validation loss wins, as in the DAG (one select_best for both)
    tied = [make_train_result("a", 0.94, 0.4), make_train_result("b", 0.99, 0.1), make_train_result("c", 0.94, 0.3)]
    assert best_trained(tied, specs).name == "c"


def test_unknown_profile_is_a_clear_error(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="unknown profile 'huge'.*quick, full"):
        run(settings, "huge")


def test_summary_counts_epochs_from_one() -> None:
    result = {"profile": "quick", "seconds": 300.0, "timings": {"simulate": 5.0},
              "models": [{"name": "LSTM-RNN (ncell=96)", "run_id": "r1", "best_epoch": 8, "epochs_run": 8,
                          "best_metric": 0.93214}],
              "ensemble": {"summary": "LSTM-RNN + MiniLM (ncell=96): mix 0.10 ..."},
              "ship": {"summary": "ship LSTM-RNN + MiniLM (ncell=96) (runs:/e/model): the best, beats ...",
                       "signal": "gate set gate-slice (1,024 judged queries)"},
              "promotion": {"summary": "promoted deepsent-ranker version 1 to champion (was unset): no champion yet\n"
                                       "decision recorded in MLflow run r2 (experiment deepsent-promotion)"},
              "table_markdown": "| Model |", "report": {"table.html": "/x/table.html"}, "mlflow_ui": "mlflow ui ..."}
    result["served_search"] = {"corpus_titles": 48097, "queries": 500, "table_markdown": "| System | Params |"}
    text = summary(result)
    assert "Served search of the champion beside BM25 (whole corpus of 48,097 titles, 500 judged queries):" in text
    assert "best epoch 8 of 8  valid MRR 0.9321" in text
    assert "  promoted deepsent-ranker version 1 to champion (was unset): no champion yet\n  decision recorded" in text
    assert ("Which model to ship (decided on the gate set gate-slice (1,024 judged queries); never on the reported "
            "set):\n  LSTM-RNN + MiniLM") in text
    assert "\n  ship LSTM-RNN + MiniLM (ncell=96) (runs:/e/model)" in text
    assert "Report: /x/table.html" in text and "Browse experiments: mlflow ui ..." in text


def test_tiny_profile_end_to_end_and_resume_reuses_finished_models(settings: Settings, tiny_chain: TinyChain,
                                                                   tiny_profile_registered: Any) -> None:
    from mlflow import MlflowClient

    first, small_data_dir = tiny_chain.result, tiny_chain.settings.data_dir  # deepsent run of the tiny profile
    settings = copy_of(tiny_chain, settings)  # its store, to resume in
    counts = first["counts"]
    assert counts["landing_rows"] == counts["ingest"]["rows_read"] > 0
    assert counts["ingest"]["rows_read"] == sum(counts["ingest"][k] for k in ("accepted", "quarantined", "duplicates",
                                                                            "bot_rows"))
    assert "| LSTM-RNN (ncell=8) | n=2, gamma=10" in first["table_markdown"] and "| Random order |" in first["table_markdown"]
    assert "| DSSM (nhid=288/96) | n=2, gamma=10" in first["table_markdown"] and "| BM25 |" in first["table_markdown"]
    lstm = next(m for m in first["models"] if m["name"].startswith("LSTM-RNN"))
    top = max(m["best_metric"] for m in first["models"])  # the grid's two runs share n: one comparison
    assert first["best_model"] in {m["model_uri"] for m in first["models"] if m["best_metric"] == top}
    assert len(first["models"]) == 2
    # the chain ends in the champion's index, built from the vectors the gate stored: each title through each
    # encoder (a tower, or half of the ensemble's) at most once over the whole run
    assert first["index"]["version"] == "1" and first["index"]["encoded"] == 0 and first["index"]["count"] > 1000
    titles = {(key, text): n for (key, side, text), n in tiny_chain.encoded.items() if side == "doc"}
    assert len({key for key, _ in titles}) >= 2 and len(titles) > 1000 and max(titles.values()) == 1
    assert 'deepsent search --store' in summary(first) and first["search_example"].endswith('"cordless drill"')
    ensemble, ship = first["ensemble"], first["ship"]
    assert ensemble["parts"]["lstm"] == lstm["model_uri"] and "| LSTM-RNN + MiniLM (ncell=8) |" in first["table_markdown"]
    assert ship["summary"].startswith("ship ") and ship["signal"].startswith("gate set gate-slice (")
    # a trained model ships only when it beats MiniLM off the shelf on the gate set by a CI above zero
    trained = {m["model_uri"] for m in first["models"]} | {ensemble["model_uri"]}
    assert (ship["model_uri"] in trained) == (ship["margin"]["ci_low"] > 0) != ship["off_the_shelf"]
    if ship["off_the_shelf"]:  # one epoch of an 8-cell LSTM-RNN on two simulated days: MiniLM off the shelf ships
        assert "no trained model beat the off-the-shelf encoder on the gate set gate-slice" in ship["summary"]
    assert first["promotion"]["decision"] == "promoted" and first["promotion"]["champion"] == "1"
    # the gate decides on the decision set the ship choice used (the gate slice), never on the reported dev set
    assert first["promotion"]["gate_set"].endswith("judgments_train.csv (gate-slice)")
    # the job prints the champion's served search beside BM25's over the whole corpus, and the gate searched too
    served = first["served_search"]
    assert served["rows"][0]["name"].startswith("BM25") and served["corpus_titles"] > 1000
    # BM25 + click prior (eval/baselines/bm25_prior.py): the store has training clicks
    assert (served["rows"][1]["name"], served["rows"][1]["mode"]) == ("BM25 + click prior", "bm25+prior")
    assert 0 <= served["rows"][1]["prior_weight"] <= 1 and set(served["cold_start"]["splits"]) == {"cold", "warm"}
    assert {r["mode"] for r in served["rows"][2:]} == {"dense", "rrf", "rerank", "linear"}
    assert len({r["name"].split(" · ")[0] for r in served["rows"][2:]}) == 1  # one model: the champion, in every mode
    assert "Served search of the champion beside BM25" in summary(first)
    # the catalogue (#42): the simulated days' catalogue moved (launches, edits, retirements on the second day), and
    # its last day's live products are the corpus the index serves; the served table adds the dev titles it lacks
    manifests = sorted((Path(tiny_chain.settings.store) / "catalog" / "_manifests").glob("dt=*.json"))
    last = json.loads(manifests[-1].read_text())
    assert len(manifests) == 2 and all(last[k] > 0 for k in ("launches", "edits", "retirements"))
    assert first["index"]["count"] == last["products"]
    assert re.search(rf"The corpus: {last['products']:,} titles of catalog/dt={last['date']}/part-0.parquet plus the "
                     r"[1-9][\d,]* judged titles of judgments_dev.csv they lack.", served["table_markdown"])
    # ... and its linear row measures the weight the gate fitted over the served corpus, not one fitted with them
    linear = [r["linear_weight"] for r in served["rows"] if r["mode"] == "linear"]
    assert linear == [first["promotion"]["served"]["challenger"]["linear_weight"]]
    assert (Path(tiny_chain.settings.store) / "reports" / "latest" / "retrieval.md").exists()
    assert first["promotion"]["served"]["challenger"]["mode"] in ("dense", "rrf", "rerank", "linear", "bm25")
    # the job's record, which docs_render renders the docs from: what it printed, the commit and the date, no local path
    saved = json.loads((Path(tiny_chain.settings.store) / "reports" / "latest" / "run.json").read_text())
    assert first["run_record"].endswith("reports/latest/run.json") and f"Run record: {first['run_record']}" in summary(first)
    assert first["encode"]["summary"] in summary(first) and first["encode"]["where"] == "in process"  # a small corpus
    assert saved["table_markdown"] == first["table_markdown"] and saved["table_markdown"] in summary(first)
    assert [(r["name"], r["ndcg@1"], r["sig@1"]) for r in saved["table"]["rows"]] == [
        (r["name"], r["ndcg@1"], r["sig@1"]) for r in first["table"]["rows"]]
    assert saved["served_search"]["rows"] == first["served_search"]["rows"] and saved["timings"] == first["timings"]
    assert saved["profile"] == "tiny" and saved["promotion"]["decision"] == "promoted" and saved["date"] and "commit" in saved
    assert tiny_chain.settings.store not in json.dumps(saved) and str(small_data_dir) not in json.dumps(saved)

    from encoders.model import text_encoder

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_encoder, "ENCODE_LOG", Counter())
        again = run(settings, "tiny", resume=True)  # the finished grid point is reused, not retrained
        assert not [text for _, side, text in text_encoder.ENCODE_LOG if side == "doc"]  # every title from the store
    assert again["models"] == first["models"] and again["table_markdown"] == first["table_markdown"]
    assert again["ensemble"] == ensemble and again["ship"] == ship
    assert again["promotion"]["decision"] == "unchanged" and again["promotion"]["champion"] == "1"
    runs = MlflowClient(tracking_uri=settings.mlflow_tracking_uri).search_runs(
        [e.experiment_id for e in MlflowClient(tracking_uri=settings.mlflow_tracking_uri).search_experiments()],
        filter_string="params.model = 'lstm'")
    assert [r.info.run_id for r in runs] == [lstm["run_id"]]


def test_run_record_names_the_commit_and_no_local_folder(settings: Settings, tmp_path: Path) -> None:
    import datetime as dt

    from deepsent.run_record import record, source_commit

    result = {"report": {"table.md": f"{settings.store}/reports/r/table.md"}, "summary": "printed",
              "mlflow_ui": "mlflow ui ...", "judgments": f"{settings.data_dir}/homedepot/judgments_dev.csv",
              "timings": {"simulate": 1.0, "ingest": 2.0}}
    saved = record(result, settings, today=dt.date(2026, 11, 26))
    assert saved["report"] == {"table.md": "<store>/reports/r/table.md"}
    assert saved["judgments"] == "<data>/homedepot/judgments_dev.csv" and "summary" not in saved and "mlflow_ui" not in saved
    assert saved["date"] == "2026-11-26" and saved["cpu_count"] and set(saved) >= {"commit", "dirty"}
    assert saved["stage_order"] == ["simulate", "ingest"]  # the order they ran in; the file's keys are sorted
    assert source_commit(tmp_path) == {"commit": None, "dirty": None}  # not a git work tree: no commit, no error
