"""``deepsent ensemble``: a trained LSTM-RNN joined with MiniLM in one registered model, ``mix`` fitted on clicks.

The LSTM-RNN run (and a fine-tuned MiniLM run, or the packaged all-MiniLM-L6-v2 when none is given)
score the held-out click lists of a features version (:mod:`pipeline.features.click_lists`: each validation
pair's clicked title among its n negatives; features cut with ``--negative-source skipped`` give the
titles the log showed for that query and nobody clicked, the candidates a re-ranker really faces).
``mix`` is the grid value with the best click MRR of ``mix * R_LSTM + (1 - mix) * R_MiniLM``
(:func:`encoders.search.fusion.fit_linear_weight` on raw cosines, which is exactly the joined model's cosine,
:mod:`encoders.towers.ensemble`). The joined model is logged like a trained one: an MLflow run in the training
experiment (parts, mix, the whole MRR curve), the pyfunc, a version of ``deepsent-ensemble``. No judged
set is read.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from encoders.model import tracking
from encoders.model.loading import load_encoder, packaged_minilm
from encoders.model.text_encoder import TextEncoder
from encoders.towers.ensemble import PARTS
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.core.results import StageResult

log = logging.getLogger(__name__)
#: the mixes tried: the LSTM-RNN's share of the score, 0.05 to 0.95 (0 and 1 would be one part alone)
MIX_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))
OFF_THE_SHELF = "all-MiniLM-L6-v2 off the shelf"
RESULT_FILE = "ensemble.json"


@dataclasses.dataclass(frozen=True)
class EnsembleResult(StageResult):
    """The joined model: its run and registered version, the fitted mix and the click MRR of it and of each part."""

    run_id: str
    model_uri: str
    registered_name: str | None
    registered_version: str | None
    registry_uri: str | None
    name: str
    mix: float
    click_mrr: float
    part_mrr: dict[str, float]
    curve: dict[str, float]
    click_lists: int
    features_version: str
    parts: dict[str, str]
    param_count: int
    seconds: float
    summary: str = ""


def _text_part(settings: Settings, minilm_uri: str | None, lstm: TextEncoder) -> TextEncoder:
    """The MiniLM part: a fine-tuned ``minilm`` run, or the packaged weights as the minilm baseline uses them (one
    tower for both sides, titles not cut at the fine-tuning's 32 word pieces: 5.6 % of the dev titles are longer)."""
    if minilm_uri:
        text = load_encoder(minilm_uri, settings)
        if text.model_type != PARTS[1]:
            raise ConfigError(f"--minilm {minilm_uri} is a {text.model_type!r} model, not {PARTS[1]!r}")
        return text
    return packaged_minilm(lstm.vocab, lstm.max_words, device=lstm.device)


def assemble(lstm_model: Any, minilm_model: Any, mix: float) -> Any:
    """The ensemble two-tower model holding copies of both parts' weights, side by side."""
    from encoders.towers.twotower import TwoTowerModel

    keys = ("ncell", "forget_gate", "peepholes", "init_scale")
    config = {**{k: lstm_model.config[k] for k in keys}, "max_tokens": minilm_model.config["max_tokens"], "mix": mix}
    joined = TwoTowerModel("ensemble", lstm_model.vocab_size, config)
    for side, tower in joined.towers().items():
        tower.trigram_part.load_state_dict(lstm_model.towers()[side].state_dict())
        tower.text_part.load_state_dict(minilm_model.towers()[side].state_dict())
    return joined.eval()


def build_ensemble(settings: Settings, lstm_uri: str, features_version: str, minilm_uri: str | None = None,
                   experiment: str = tracking.DEFAULT_EXPERIMENT, tags: dict[str, str] | None = None,
                   register: bool = True, resume: bool = False) -> EnsembleResult:
    """Fit ``mix`` on the held-out click lists of ``features_version``, log and register the joined model;
    with ``resume``, the finished ensemble of the same parts and features instead, when there is one."""
    import mlflow

    from encoders.model.vector_store import stored
    from encoders.search.fusion import click_mrr, fit_linear_weight
    from encoders.search.vectors import cosine_pair_scores
    from pipeline.core.store import Store
    from pipeline.features.click_lists import valid_click_lists

    started = time.perf_counter()
    if resume:
        from encoders.model.tracking import model_uri_of

        done = finished_ensemble(settings, experiment, {PARTS[0]: model_uri_of(lstm_uri),
                                                        PARTS[1]: model_uri_of(minilm_uri) if minilm_uri else OFF_THE_SHELF},
                                 features_version)
        if done is not None:
            log.info("ensemble: reusing run %s (--resume)", done.run_id)
            return done
    lstm = load_encoder(lstm_uri, settings)
    if lstm.model_type != PARTS[0]:
        raise ConfigError(f"--lstm {lstm_uri} is a {lstm.model_type!r} model, not {PARTS[0]!r}")
    text = _text_part(settings, minilm_uri, lstm)
    store = Store.from_settings(settings)
    lists = valid_click_lists(store, features_version)
    log.info("ensemble: scoring %d held-out click lists of features %s with both parts", lists.num_groups,
             features_version)
    scores = {part: cosine_pair_scores(stored(enc, store).encode, lists.queries, lists.titles)
              for part, enc in zip(PARTS, (lstm, text))}  # the vectors stay in the store: the ensemble's halves reuse them
    fit = fit_linear_weight(scores[PARTS[0]], scores[PARTS[1]], lists.group, lists.clicked, "none", MIX_GRID)
    alone = {part: click_mrr(s, lists.group, lists.clicked)["mrr"] for part, s in scores.items()}
    joined = assemble(lstm.model, text.model, fit.weight)
    parts = {PARTS[0]: lstm.model_uri, PARTS[1]: text.model_uri or OFF_THE_SHELF}
    with tracking.run(settings, experiment, run_name=f"ensemble-mix{fit.weight:.2f}", tags=tags) as active:
        mlflow.log_params(tracking.flatten({"model": "ensemble", "tower": dict(joined.config), "parts": parts,
                                            "features_version": features_version, "fit": "click MRR, raw cosines"}))
        mlflow.log_metrics({"valid_mrr": fit.mrr, **{f"valid_mrr_{part}": mrr for part, mrr in alone.items()}})
        logged = tracking.log_model(joined, lstm.vocab, lstm.max_words, lstm.training.get("gamma"), register=register)
        run_id = active.info.run_id
        summary = (f"{joined.name}: mix {fit.weight:.2f} (LSTM-RNN share of the score) by click MRR {fit.mrr:.4f} "
                   f"on {lists.num_groups} held-out click lists of features {features_version} (LSTM-RNN alone "
                   f"{alone[PARTS[0]]:.4f}, MiniLM alone {alone[PARTS[1]]:.4f}); run {run_id}")
        result = EnsembleResult(
            run_id=run_id, model_uri=logged["model_uri"], registered_name=logged["registered_name"],
            registered_version=logged["registered_version"], registry_uri=logged["registry_uri"], name=joined.name,
            mix=fit.weight, click_mrr=fit.mrr, part_mrr=alone, curve={str(w): m for w, m in fit.curve.items()},
            click_lists=lists.num_groups, features_version=features_version, parts=parts,
            param_count=joined.param_counts()["total"], seconds=round(time.perf_counter() - started, 1),
            summary=summary)
        mlflow.log_dict(result.to_dict(), RESULT_FILE)  # the mix curve included; --resume reads it back
    log.info("%s", summary)
    return result


def finished_ensemble(settings: Settings, experiment: str, parts: dict[str, str],
                      features_version: str) -> EnsembleResult | None:
    """The result of the newest finished ensemble of these parts fitted on ``features_version``, if any."""
    import mlflow
    from mlflow import MlflowClient

    query = " and ".join([f"params.`parts.{part}` = '{uri}'" for part, uri in parts.items()]
                         + [f"params.features_version = '{features_version}'", "attributes.status = 'FINISHED'"])
    runs = MlflowClient(tracking_uri=settings.mlflow_tracking_uri).search_runs(
        [tracking.experiment_id(settings, experiment)], filter_string=query, order_by=["attributes.start_time DESC"],
        max_results=1)
    if not runs:
        return None
    return EnsembleResult.from_dict(mlflow.artifacts.load_dict(f"runs:/{runs[0].info.run_id}/{RESULT_FILE}"))
