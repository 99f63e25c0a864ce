"""Promotion to ``deepsent-ranker@champion``: the gate on a team's own judged set, force, rollback, concurrent
promotes, and the default gate on held-out click lists.

Real MLflow (SQLite), real models: the tiny trained LSTM, a lexical DSSM (better than it) and the
same DSSM with its rankings reversed (clearly worse); see ``lexical_dssm`` in tests/conftest.py.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from encoders.model.ranker_registry import CHALLENGER, CHAMPION, RANKER
from eval.promotion.promote import EXPERIMENT
from eval.promotion.promote import promote as promote_on
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.storage.store import Store
from tests.gate_sets import train_gate_set


def gate_set(settings: Settings) -> Path:
    """A judged set of the team's own (500 queries of the training judgments), beside the settings' store."""
    return train_gate_set(settings, Path(settings.store).parent / "gate.csv")


def promote(settings: Settings, *args: Any, **kwargs: Any) -> Any:
    """:func:`eval.promotion.promote.promote` gated on a judged set of the team's own (:func:`gate_set`)."""
    kwargs.setdefault("gate_judgments", gate_set(settings))
    return promote_on(settings, *args, **kwargs)


def _client(settings: Settings) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(settings.mlflow_tracking_uri)


def _alias(settings: Settings, alias: str) -> str:
    return str(_client(settings).get_model_version_by_alias(RANKER, alias).version)


def _version_tags(settings: Settings, version: str) -> dict[str, str]:
    return _client(settings).get_model_version(RANKER, version).tags


def _decision_runs(settings: Settings) -> list[Any]:
    client = _client(settings)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    return client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])


def test_first_model_becomes_champion_then_gate_promotes_better_and_refuses_worse(
        registry: Settings, promotion_registry: dict[str, Any]) -> None:
    uris = promotion_registry["uris"]
    first = promote(registry, uris["trained"])
    assert (first.decision, first.champion, first.champion_before, first.version) == ("promoted", "1", None, "1")
    assert first.reason == "no champion yet" and _alias(registry, CHAMPION) == _alias(registry, CHALLENGER) == "1"
    tags = _version_tags(registry, "1")
    assert tags["deepsent.decision"] == "promoted" and tags["deepsent.compared_against"] == "none"
    assert tags["deepsent.gate_set"] == str(gate_set(registry)) and len(tags["deepsent.gate_sha256"]) == 64
    assert {f"ndcg_at_{k}" for k in (1, 3, 10)} <= set(tags)
    assert float(tags["ndcg_at_10"]) == pytest.approx(first.challenger_ndcg["ndcg@10"], abs=5e-5)
    # the same model again: already the champion, registered once
    again = promote(registry, uris["trained"])
    assert again.decision == "unchanged" and len(_client(registry).search_model_versions(f"name = '{RANKER}'")) == 1

    better = promote(registry, uris["lexical"])
    assert (better.decision, better.version, better.champion, better.champion_before) == ("promoted", "2", "2", "1")
    assert better.reason.startswith("beats the champion at ndcg@10 (+") and "CI [" in better.reason
    assert better.challenger_ndcg["ndcg@10"] > better.champion_ndcg["ndcg@10"]
    import mlflow

    from encoders.model.ranker_registry import logged_model_id

    logged = mlflow.get_logged_model(logged_model_id(_client(registry).get_model_version(RANKER, "2")))
    assert {m.key: m.value for m in logged.metrics}["ndcg_at_10"] == pytest.approx(better.challenger_ndcg["ndcg@10"])

    worse = promote(registry, uris["reversed"])
    assert (worse.decision, worse.version, worse.champion, worse.champion_before) == ("refused", "3", "2", "2")
    assert _alias(registry, CHAMPION) == "2" and _alias(registry, CHALLENGER) == "3"
    assert worse.reason.startswith("significantly worse at ndcg@1, ndcg@3, ndcg@10") and "(paired t-test, p < 0.05): " in worse.reason
    for metric in ("ndcg@1", "ndcg@3", "ndcg@10"):  # both figures and the p-value of each cutoff
        assert f"{metric} {worse.challenger_ndcg[metric]:.4f} vs {worse.champion_ndcg[metric]:.4f} (p=" in worse.reason
        assert worse.p_values[metric] < 0.05
    assert "refused" in worse.summary and "stays version 2" in worse.summary
    tags = _version_tags(registry, "3")
    assert tags["deepsent.decision"] == "refused" and tags["deepsent.compared_against"] == "2"
    assert tags["deepsent.reason"] == worse.reason and tags["deepsent.promotion_run"] == worse.mlflow_run_id
    runs = _decision_runs(registry)
    assert [r.data.tags["deepsent.decision"] for r in runs] == ["promoted", "unchanged", "promoted", "refused"]
    last = runs[-1]
    assert last.info.status == "FINISHED" and last.data.params["gate_sha256"] == tags["deepsent.gate_sha256"]
    assert last.data.metrics["p_value_ndcg_at_10"] == pytest.approx(worse.p_values["ndcg@10"])
    assert last.data.metrics["champion_ndcg_at_1"] == pytest.approx(worse.champion_ndcg["ndcg@1"])


def test_force_overrides_the_gate_and_version_rolls_back(registry: Settings, promotion_registry: dict[str, Any]) -> None:
    uris = promotion_registry["uris"]
    assert promote(registry, uris["lexical"]).champion == "1"
    forced = promote(registry, uris["reversed"], force=True)
    assert (forced.decision, forced.champion, forced.forced) == ("promoted", "2", True)
    assert forced.reason.startswith("forced (--force) although the gate refused: significantly worse at")
    assert _alias(registry, CHAMPION) == "2"
    back = promote(registry, version="1")
    assert (back.decision, back.champion, back.champion_before) == ("rolled back", "1", "2")
    assert _alias(registry, CHAMPION) == "1" and _version_tags(registry, "1")["deepsent.decision"] == "rolled back"
    with pytest.raises(ConfigError, match=f"no version 7 of {RANKER}"):
        promote(registry, version="7")
    assert _alias(registry, CHAMPION) == "1"


def test_a_gate_on_another_metric_and_judged_set(registry: Settings, promotion_registry: dict[str, Any],
                                                 tmp_path: Path) -> None:
    import pyarrow.csv as pacsv

    from pipeline.text.homedepot import read_judgments

    own = read_judgments(gate_set(registry)).slice(0, 1500)
    gate = tmp_path / "sliced-gate.csv"
    pacsv.write_csv(own.select(["query_raw", "title_raw", "label", "doc_id"]).rename_columns(
        ["query", "title", "label", "doc_id"]), gate)
    promote(registry, promotion_registry["uris"]["trained"], gate_judgments=gate)
    result = promote(registry, promotion_registry["uris"]["lexical"], gate_judgments=gate, metric="ndcg@3")
    assert result.metric == "ndcg@3" and result.gate_set == str(gate)
    assert result.decision == ("promoted" if result.challenger_ndcg["ndcg@3"] > result.champion_ndcg["ndcg@3"]
                               else "refused")
    assert _version_tags(registry, result.version)["deepsent.gate_set"] == str(gate)
    with pytest.raises(ConfigError, match="gate metric 'ndcg@5' is not one of ndcg@1, ndcg@3, ndcg@10"):
        promote(registry, promotion_registry["uris"]["lexical"], metric="ndcg@5")


def test_concurrent_promotes_leave_one_champion_and_both_decisions(registry: Settings,
                                                                    promotion_registry: dict[str, Any]) -> None:
    """Two promotes at once: the second gates against the first's result, whichever runs first.

    Lexical first: it becomes the champion and the reversed model is refused. Reversed first: it becomes the
    champion and the lexical model beats it. Either way the lexical model ends as the champion, one decision
    saw no champion and the other was compared against it. Without the lock both see no champion (the test
    failed so when the lock was taken out). Threads start together at a barrier, after imports and the
    gate set's first read, so their read-decide-write windows overlap; each opens the lock file itself.
    """
    import threading

    barrier = threading.Barrier(2)
    results: dict[str, Any] = {}

    def promote_one(name: str) -> None:
        barrier.wait()
        try:
            results[name] = promote(registry, promotion_registry["uris"][name])
        except Exception as exc:  # reported by the assertion below
            results[name] = exc

    from eval.decisions.gate_set import load_gate_set

    load_gate_set(registry, gate_set(registry))  # warm the file cache: both threads read it at the same time
    threads = [threading.Thread(target=promote_one, args=(name,)) for name in ("reversed", "lexical")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert all(not isinstance(r, Exception) for r in results.values()), results
    first, second = sorted(results.values(), key=lambda r: r.champion_before is not None)
    assert first.champion_before is None and first.decision == "promoted" and first.reason == "no champion yet"
    assert second.champion_before == first.version and second.decision in ("promoted", "refused")
    assert _alias(registry, CHAMPION) == _lexical_version(registry, promotion_registry)
    client = _client(registry)
    versions = [client.get_model_version(RANKER, v.version) for v in client.search_model_versions(f"name = '{RANKER}'")]
    assert len(versions) == 2 and [CHAMPION in v.aliases for v in versions].count(True) == 1
    runs = _decision_runs(registry)
    assert sorted(r.data.tags["deepsent.decision"] for r in runs) == sorted(r.decision for r in results.values())
    assert {r.info.run_id for r in runs} == {r.mlflow_run_id for r in results.values()}


def _lexical_version(settings: Settings, promotion_registry: dict[str, Any]) -> str:
    """The ranker version registered for the lexical DSSM's training run."""
    client = _client(settings)
    name, number = promotion_registry["uris"]["lexical"].removeprefix("models:/").split("/")
    run_id = client.get_model_version(name, number).run_id
    return str(client.search_model_versions(f"name = '{RANKER}' and run_id = '{run_id}'")[0].version)


def test_a_model_logged_before_the_pyfunc_is_packaged_as_one(registry: Settings, promotion_registry: dict[str, Any],
                                                             tmp_path: Path) -> None:
    """A run whose ``model`` is the bare saved folder: promotion logs it as a pyfunc in the decision run."""
    import mlflow
    import numpy as np

    from encoders.model import tracking
    from encoders.model.loading import load_encoder
    from encoders.model.saved_model import save_model
    from pipeline.features.trigram import TrigramVocab
    from tests.conftest import lexical_dssm

    trained = promotion_registry["trained"]
    vocab = TrigramVocab.load(Store(str(Path(trained.checkpoint).parents[3])),
                              f"features/{trained.features_version}/vocab.json")
    with tracking.run(registry, "promotion-test-models"):
        mlflow.log_artifacts(str(save_model(lexical_dssm(vocab.size), vocab, 30, tmp_path / "bare")), "model")
        bare = tracking.model_uri_of(mlflow.active_run().info.run_id)
    result = promote(registry, bare)
    assert result.decision == "promoted" and result.version == "1"
    version = _client(registry).get_model_version(RANKER, "1")
    assert version.run_id == bare.split("/")[1] and version.source.startswith("models:/m-")
    served = mlflow.pyfunc.load_model("models:/deepsent-ranker@champion").predict(["cordless drill", "deck screws"])
    np.testing.assert_allclose(served, load_encoder(bare, registry).encode(["cordless drill", "deck screws"], "query"),
                               rtol=1e-6, atol=1e-7)


def test_the_clicks_setting_gates_on_the_held_out_click_lists(registry: Settings,
                                                               promotion_registry: dict[str, Any]) -> None:
    from eval.decisions.gate_set import click_judged_set
    from pipeline.features.click_lists import valid_click_lists

    registry = registry.with_overrides(gate_judgments="clicks")  # DEEPSENT_GATE_JUDGMENTS=clicks: no judged gate set
    trained = promotion_registry["trained"]
    with pytest.raises(ConfigError, match="no feature shards .*: run deepsent featurize first"):
        promote_on(registry, promotion_registry["uris"]["lexical"])  # nothing to gate on: one clear error
    for folder in ("features", "pairs", "click_lists"):
        shutil.copytree(Path(trained.checkpoint).parents[3] / folder, Path(registry.store) / folder)
    with pytest.raises(ConfigError, match="no features with 4 skipped negatives .* --negative-source skipped"):
        promote_on(registry, promotion_registry["uris"]["lexical"])
    version = trained.features_version
    promote_on(registry, promotion_registry["uris"]["trained"], gate_features=version)
    result = promote_on(registry, promotion_registry["uris"]["lexical"], gate_features=version)
    assert result.gate_set == f"click-lists:features/{version}"
    assert _version_tags(registry, result.version)["deepsent.gate_set"] == result.gate_set
    assert result.decision == "promoted"  # the lexical model ranks the clicked titles far above the tiny LSTM
    assert result.challenger_ndcg["ndcg@10"] > result.champion_ndcg["ndcg@10"]
    lists, judged = valid_click_lists(Store.from_settings(registry), version), click_judged_set(registry, version)
    assert set(judged.query) == set(lists.queries) and len(set(judged.query)) > 10
    clicked = {(q, t) for q, t, c in zip(lists.queries, lists.titles, lists.clicked.tolist()) if c}
    assert int(judged.label.sum()) == len(clicked) and set(judged.label.tolist()) == {0, 1}
    # the gate judged what is served: both models searched the whole corpus on held-out click queries
    served = result.served
    assert served is not None and served["champion"] is not None and 0.0 <= served["p_value"] <= 1.0
    from encoders.search import vector_index as vi
    from encoders.search.modes import MODES
    from pipeline.features.click_lists import held_out_clicks

    clicks = held_out_clicks(Store.from_settings(registry))
    for figures in (served["challenger"], served["champion"]):
        assert figures["mode"] in MODES and 0.0 <= figures["recall@10"] <= 1.0 and 0.0 <= figures["ndcg@10"] <= 1.0
        assert figures["queries"] == len(clicks) - len(clicks) // 2 and figures["corpus_titles"] > 1000
        served_kind = "IndexFlatIP" if vi.plan(figures["corpus_titles"]) == "exact" else "IndexIVFScalarQuantizer"
        assert figures["index"] == served_kind  # the gate searched the index deepsent index serves at this size
    tags = _version_tags(registry, result.version)
    assert tags["deepsent.served_mode"] == served["challenger"]["mode"]
    assert float(tags["served_ndcg_at_10"]) == pytest.approx(served["challenger"]["ndcg@10"], abs=5e-5)
    assert float(tags["served_recall_at_10"]) == pytest.approx(served["challenger"]["recall@10"], abs=5e-5)
    assert "held-out click queries" in tags["deepsent.served_set"] and "served search, whole corpus" in result.summary
