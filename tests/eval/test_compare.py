"""The comparison stage end to end on a slice of the real dev set, the model adapter, and the CLI."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from encoders.search.vectors import cosine_pair_scores
from eval.baselines.base import FitContext
from eval.compare import build_rows, compare, evaluate, parse_baseline, reference_of, resolve_baselines
from eval.judgments import load_judged_set
from eval.model_scorer import ModelScorer
from pipeline.core.errors import ConfigError, DeepsentError
from pipeline.storage.store import Store
from pipeline.text.homedepot import ENCODING
from tests.eval.stand_in import StandInEncoder

CHEAP = ["bm25", "ulm", "plsa:topics=4:iterations=3:fold_in_iterations=5", "random"]


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite tracking store for this module (creating its tables costs seconds)."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture()
def cmp_settings(settings, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch):
    """Settings on a fresh store, sharing the module's tracking store (also for the CLI)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    return settings.with_overrides(mlflow_tracking_uri=mlflow_uri)


def _dev_slice(settings, tmp_path: Path, queries: int = 40) -> Path:
    """Every judgment of the first ``queries`` queries of judgments_dev.csv, as published (ISO-8859-1)."""
    out = tmp_path / f"dev_slice_{queries}.csv"
    with settings.dev_judgments.open(encoding=ENCODING, newline="") as src:
        header, *records = list(csv.reader(src))
    keep = set(list(dict.fromkeys(rec[3] for rec in records))[:queries])
    with out.open("w", encoding=ENCODING, newline="") as dst:
        writer = csv.writer(dst, quoting=csv.QUOTE_NONNUMERIC)
        writer.writerow(header)
        writer.writerows([int(r[0]), r[1], r[2], r[3], float(r[4])] for r in records if r[3] in keep)
    return out


class FixedScores:
    """A baseline that returns given scores (to check that models and baselines are treated alike)."""

    name = "fixed"

    def __init__(self, scores: np.ndarray) -> None:
        self.scores = scores

    def fit(self, ctx: FitContext) -> None:
        """Nothing to learn."""

    def score(self, queries: Any, titles: Any) -> np.ndarray:
        """The given scores."""
        return self.scores

    def describe(self) -> dict[str, Any]:
        """No details."""
        return {"settings": "", "params": None}


def test_parse_baseline_options() -> None:
    assert parse_baseline("plsa:topics=500:tol=1e-4:mode=x") == ("plsa", {"topics": 500, "tol": 1e-4, "mode": "x"})
    with pytest.raises(ConfigError, match="key=value"):
        parse_baseline("plsa:500")


def test_table_end_to_end_on_a_slice_of_the_dev_set(cmp_settings, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    path = _dev_slice(cmp_settings, tmp_path)
    result = compare(cmp_settings, judgments=path, baselines=CHEAP, tags={"dag_id": "test"})
    rows = {r["key"]: r for r in result.rows}
    assert list(rows) == CHEAP[:3] + ["random"]  # random printed last, as the floor
    assert result.queries == 40 and result.excluded_queries == []
    judged = load_judged_set(path)
    assert result.pairs == len(judged)
    ref = [r for r in result.rows if r["reference"]]
    assert len(ref) == 1 and ref[0]["key"] != "random" and result.reference == ref[0]["name"]
    best = max((r for r in result.rows if r["key"] != "random"), key=lambda r: np.mean([r[f"ndcg@{k}"] for k in (1, 3, 10)]))
    assert best["reference"]
    for r in result.rows:
        assert all(0 < r[f"ndcg@{k}"] <= 1 for k in (1, 3, 10))
        assert (r["p@1"] is None) == r["reference"]
    assert rows["bm25"]["params"] is None and rows["plsa:topics=4:iterations=3:fold_in_iterations=5"]["params"] > 0

    store = Store.from_settings(cmp_settings)
    for name in ("table.md", "table.csv", "table.html", "ndcg.png", "per_query.parquet"):
        assert store.exists(store.relpath(result.report[name])), name
    md = store.read_text(store.relpath(result.report["table.md"]))
    assert "ndcg_burges" in md and "| BM25 |" in md and "(ref)" in md
    assert store.read_bytes(store.relpath(result.report["ndcg.png"]))[:8] == b"\x89PNG\r\n\x1a\n"
    per_query = store.read_table(store.relpath(result.report["per_query.parquet"]))
    assert per_query.num_rows == 40
    assert np.mean(per_query.column("bm25@10").to_numpy()) == pytest.approx(rows["bm25"]["ndcg@10"])

    run = MlflowClient(tracking_uri=cmp_settings.mlflow_tracking_uri).get_run(result.mlflow_run_id)
    assert run.data.tags["dag_id"] == "test" and run.data.params["baselines"] == ",".join(CHEAP)
    assert run.data.metrics["ndcg_at_10/bm25"] == pytest.approx(rows["bm25"]["ndcg@10"])
    artifacts = {a.path for a in MlflowClient(tracking_uri=cmp_settings.mlflow_tracking_uri).list_artifacts(run.info.run_id, "report")}
    assert {"report/table.md", "report/table.csv", "report/table.html", "report/ndcg.png"} <= artifacts

    # a re-run (PLSA now from the store cache) writes the same table bytes and no extra files
    before = {name: store.read_bytes(store.relpath(uri)) for name, uri in result.report.items()}
    files_before = store.list_files(f"reports/{result.report_name}")
    again = compare(cmp_settings, judgments=path, baselines=CHEAP)
    assert again.report_name == result.report_name
    assert store.list_files(f"reports/{result.report_name}") == files_before
    for name in ("table.md", "table.csv", "table.html", "ndcg.png", "per_query.parquet"):
        assert store.read_bytes(store.relpath(again.report[name])) == before[name], name
    assert {r["key"]: r["cached"] for r in again.rows}["plsa:topics=4:iterations=3:fold_in_iterations=5"]


def test_a_product_judged_under_two_titles_is_scored_under_both(cmp_settings, tmp_path: Path) -> None:
    # judgments_train.csv has 10 products whose title differs between rows; each row must be scorable
    path = tmp_path / "two_titles.csv"
    path.write_text("query,title,label,doc_id\n"
                    "deck screws,deck screws 2 in,3,p1\n"
                    "deck screws,garden hose,0,p2\n"
                    "garden hose,garden hose 50 ft,3,p3\n"
                    "garden hose,deck screws 2 in. box,0,p1\n", encoding="utf-8")
    result = compare(cmp_settings, judgments=path, baselines=["bm25", "ulm"])
    assert result.pairs == 4 and result.queries == 2
    assert all(r["ndcg@1"] == 1.0 for r in result.rows if r["key"] != "random")


def test_model_adapter_scores_by_cosine_and_reports_its_details(settings) -> None:
    ctx = FitContext(settings, Store.from_settings(settings), [], [], [], [])
    scorer = ModelScorer("runs:/0123456789abcdef/model", loader=lambda uri, s: StandInEncoder())
    scorer.fit(ctx)
    queries, titles = ["red drill", "red drill", "hose"], ["red cordless drill", "garden hose", "garden hose"]
    scores = scorer.score(queries, titles)
    enc = StandInEncoder()
    q, t = enc.encode(queries, "query"), enc.encode(titles, "doc")
    expected = (q * t).sum(1) / np.linalg.norm(q, axis=1) / np.linalg.norm(t, axis=1)
    np.testing.assert_allclose(scores, expected, rtol=1e-6)
    assert scores[0] > scores[1]
    details = scorer.describe()
    assert (scorer.name, details["params"], details["run_id"]) == ("stand-in", 1234, "0123456789abcdef")
    assert "model=bag-of-words" in details["settings"]


def test_a_model_and_a_baseline_with_identical_scores_get_identical_ndcg(settings, tmp_path: Path) -> None:
    judged = load_judged_set(_dev_slice(settings, tmp_path, queries=30))
    ctx = FitContext(settings, Store.from_settings(settings), [], [], [], [])
    model = ModelScorer("stand-in-uri", loader=lambda uri, s: StandInEncoder())
    same = cosine_pair_scores(StandInEncoder().encode, judged.query, judged.title)
    evaluations = [
        evaluate("fixed", "Fixed", "baseline", FixedScores(same), ctx, judged),
        evaluate("stand-in-uri", "stand-in-uri", "model", model, ctx, judged),
    ]
    for k in (1, 3, 10):
        np.testing.assert_array_equal(evaluations[0].result.per_query[k], evaluations[1].result.per_query[k])
    rows = build_rows(evaluations, reference_of(evaluations), seed=7)
    assert rows[0]["reference"] and rows[1]["p@1"] == 1.0 and rows[1]["sig@1"] == ""


def test_unknown_baseline_is_a_clear_error_and_a_missing_optional_one_is_reported(
    cmp_settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval.baselines import minilm

    path = _dev_slice(cmp_settings, tmp_path, queries=5)
    with pytest.raises(ConfigError, match="unknown baseline 'bm52'; available: bm25, ulm, plsa"):
        compare(cmp_settings, judgments=path, baselines=["bm52"])
    reason = "minilm unavailable: sentence_transformers not installed (install the project's 'minilm' extra)"
    monkeypatch.setattr(minilm, "UNAVAILABLE_REASON", reason)  # as on an install without the extra
    scorers, unavailable = resolve_baselines(["random", "minilm"])
    assert [key for key, _, _ in scorers] == ["random"]
    assert unavailable == {"minilm": reason}


def test_cli_prints_the_table_and_one_json_object(cmp_settings, tmp_path: Path, capsys) -> None:
    from deepsent.cli import main

    path = _dev_slice(cmp_settings, tmp_path, queries=5)
    common = ["--store", cmp_settings.store, "--data-dir", str(cmp_settings.data_dir)]
    assert main(["compare", *common, "--judgments", str(path), "--baselines", "random,ulm"]) == 0
    out = capsys.readouterr().out
    assert "| ULM |" in out and "| Random order |" in out and "mlflow run:" in out
    assert main(["compare", *common, "--json", "--judgments", str(path), "--format", "homedepot", "--baselines", "random,ulm"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [r["key"] for r in payload["rows"]] == ["ulm", "random"] and "summary" not in payload
    assert main(["compare", *common, "--judgments", str(tmp_path / "missing.csv")]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "graded"),
    [("query,title,label\nq1,a,0\nq1,b,0\nq2,a,0\n", 0), ("query,title,label\nq1,a,2\nq1,b,0\nq2,a,0\n", 1)],
    ids=["none_graded", "one_graded"],
)
def test_fewer_than_two_graded_queries_is_one_line_not_a_traceback(
    cmp_settings, tmp_path: Path, capsys, text: str, graded: int
) -> None:
    # used to end in "ValueError: a paired test needs at least 2 queries" after fitting every baseline
    from deepsent.cli import main

    path = tmp_path / "few.csv"
    path.write_text(text, encoding="utf-8")
    common = ["--store", cmp_settings.store, "--data-dir", str(cmp_settings.data_dir)]
    assert main(["compare", *common, "--judgments", str(path), "--baselines", "random,bm25"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0]
    assert f"{graded} of 2 queries have a title with a positive grade" in err[0]


def test_real_loader_turns_a_bad_model_uri_into_a_clear_error(cmp_settings, tmp_path: Path) -> None:
    path = _dev_slice(cmp_settings, tmp_path, queries=5)
    with pytest.raises(DeepsentError):
        compare(cmp_settings, judgments=path, baselines=["random"], models=["runs:/does-not-exist/model"])


def test_a_trained_model_is_ranked_beside_the_baselines(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Real train -> compare with the shared ``trained_run`` fixture (a small LSTM trained for 2 epochs)."""
    settings, trained = request.getfixturevalue("trained_run")
    path = _dev_slice(settings, tmp_path, queries=20)
    result = compare(settings, judgments=path, baselines=["random"], models=[trained.registry_uri])
    model = next(r for r in result.rows if r["kind"] == "model")
    assert model["run_id"] == trained.run_id and model["params"] > 0
    assert model["settings"].startswith("n=4, gamma=10")  # the run's n and gamma, from its MLflow params
    assert all(0 < model[f"ndcg@{k}"] <= 1 for k in (1, 3, 10))
    assert model["p@1"] is not None  # compared with the (random) reference


def test_rows_sharing_a_name_are_told_apart_in_the_chart() -> None:
    from eval.report import distinct_names

    rows = [{"name": "BM25", "settings": "k1=1.5"}, {"name": "LSTM-RNN (ncell=96)", "settings": "n=2, gamma=10"},
            {"name": "LSTM-RNN (ncell=96)", "settings": "n=8, gamma=10"}]
    assert distinct_names(rows) == ["BM25", "LSTM-RNN (ncell=96) n=2", "LSTM-RNN (ncell=96) n=8"]
