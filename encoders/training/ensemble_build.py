"""``deepsent ensemble``: a trained LSTM-RNN joined with MiniLM in one registered model, ``mix`` chosen on the decision set.

The LSTM-RNN run (and a fine-tuned MiniLM run, or the packaged all-MiniLM-L6-v2 when none is given) score the
judged pairs of the chain's decision set (the gate set, else the held-out click lists); the chooser the caller
passes (``eval.decisions.mix``, above this layer) picks ``mix`` from both parts' cosines: the smallest LSTM-RNN share
within one standard error of the best, kept only when it beats MiniLM alone by a paired bootstrap CI above zero
(``mix * R_LSTM + (1 - mix) * R_MiniLM`` is exactly the joined model's cosine, :mod:`encoders.towers.ensemble`).
The joined model is logged like a trained one: an MLflow run in the training experiment (parts, mix, the whole
curve), the pyfunc, a version of ``deepsent-ensemble``. The reported judged set is never read.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from encoders.model import tracking
from encoders.model.loading import load_encoder, packaged_minilm
from encoders.model.text_encoder import TextEncoder
from encoders.towers.ensemble import PARTS
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from encoders.training.results import EnsembleResult

log = logging.getLogger(__name__)
#: the mixes tried: the LSTM-RNN's share of the score, 0.05 to 0.95 (0 and 1 would be one part alone)
MIX_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))
OFF_THE_SHELF = "all-MiniLM-L6-v2 off the shelf"
RESULT_FILE = "ensemble.json"


class MixChooser(Protocol):
    """What chooses the mix (``eval.decisions.mix``): the judged pairs to score, a key naming the decision set, what
    it is, and the choice from both parts' cosines over those pairs."""

    pairs: tuple[list[str], list[str]]
    key: str
    signal: str

    def choose(self, lstm: Any, minilm: Any) -> "MixDecision":
        """The mix from the two parts' cosines."""


class MixDecision(Protocol):
    """What a mix chooser returns (``eval.decisions.mix.MixChoice``)."""

    weight: float
    best: float
    curve: dict[float, float]
    parts: dict[str, float]
    signal: str
    why: str
    margin: Any


def model_share(choice: MixDecision) -> float:
    """The share the joined model is logged with: the chosen one, else (MiniLM alone chosen) the best one, else the
    smallest the tower takes (its mix lies strictly between 0 and 1)."""
    return choice.weight or choice.best or MIX_GRID[0]


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


def build_ensemble(settings: Settings, lstm_uri: str, features_version: str, decide: MixChooser,
                   minilm_uri: str | None = None, experiment: str = tracking.DEFAULT_EXPERIMENT,
                   tags: dict[str, str] | None = None, register: bool = True, resume: bool = False) -> EnsembleResult:
    """Score ``decide``'s judged pairs with both parts, let it choose the mix (``eval.decisions.mix``), log and
    register the joined model; with ``resume``, the finished ensemble of the same parts, features and decision
    set instead, when there is one."""
    import mlflow

    from encoders.model.vector_store import stored
    from encoders.search.vectors import cosine_pair_scores
    from pipeline.storage.store import Store

    started = time.perf_counter()
    if resume:
        from encoders.model.tracking import model_uri_of

        done = finished_ensemble(settings, experiment, {PARTS[0]: model_uri_of(lstm_uri),
                                                        PARTS[1]: model_uri_of(minilm_uri) if minilm_uri else OFF_THE_SHELF},
                                 features_version, decide.key)
        if done is not None:
            log.info("ensemble: reusing run %s (--resume)", done.run_id)
            return done
    lstm = load_encoder(lstm_uri, settings)
    if lstm.model_type != PARTS[0]:
        raise ConfigError(f"--lstm {lstm_uri} is a {lstm.model_type!r} model, not {PARTS[0]!r}")
    text = _text_part(settings, minilm_uri, lstm)
    store = Store.from_settings(settings)
    queries, titles = decide.pairs
    log.info("ensemble: scoring %d judged pairs of the %s with both parts", len(queries), decide.signal)
    scores = [cosine_pair_scores(stored(enc, store).encode, queries, titles)
              for enc in (lstm, text)]  # the vectors stay in the store: the ensemble's halves reuse them
    choice = decide.choose(*scores)
    share = model_share(choice)
    joined = assemble(lstm.model, text.model, share)
    parts = {PARTS[0]: lstm.model_uri, PARTS[1]: text.model_uri or OFF_THE_SHELF}
    with tracking.run(settings, experiment, run_name=f"ensemble-mix{share:.2f}", tags=tags) as active:
        mlflow.log_params(tracking.flatten({"model": "ensemble", "tower": dict(joined.config), "parts": parts,
                                            "features_version": features_version, "decided_on": decide.key,
                                            "fit": "NDCG@10 of the decision set, 1-SE rule, CI against MiniLM alone"}))
        mlflow.log_metrics({"decision_ndcg_at_10": choice.curve[share], "chosen_mix": choice.weight,
                            **{f"decision_ndcg_at_10_{part}": v for part, v in choice.parts.items()}})
        logged = tracking.log_model(joined, lstm.vocab, lstm.max_words, lstm.training.get("gamma"), register=register)
        run_id = active.info.run_id
        summary = (f"{joined.name}: mix {choice.weight:.2f} (LSTM-RNN share of the score; 0 = MiniLM alone) on the "
                   f"{choice.signal}: {choice.why}; the model is logged with share {share:.2f} (NDCG@10 "
                   f"{choice.curve[share]:.4f}; LSTM-RNN alone {choice.parts['lstm']:.4f}, MiniLM alone "
                   f"{choice.parts['minilm']:.4f}); run {run_id}")
        result = EnsembleResult(
            run_id=run_id, model_uri=logged["model_uri"], registered_name=logged["registered_name"],
            registered_version=logged["registered_version"], registry_uri=logged["registry_uri"], name=joined.name,
            mix=share, chosen_mix=choice.weight, score=choice.curve[share], part_scores=dict(choice.parts),
            curve={str(w): m for w, m in choice.curve.items()}, signal=choice.signal, why=choice.why,
            margin=choice.margin.to_dict(), features_version=features_version, parts=parts,
            param_count=joined.param_counts()["total"], seconds=round(time.perf_counter() - started, 1),
            summary=summary)
        mlflow.log_dict(result.to_dict(), RESULT_FILE)  # the mix curve included; --resume reads it back
    log.info("%s", summary)
    return result


def finished_ensemble(settings: Settings, experiment: str, parts: dict[str, str], features_version: str,
                      decided_on: str) -> EnsembleResult | None:
    """The result of the newest finished ensemble of these parts, features and decision set, if any."""
    import mlflow
    from mlflow import MlflowClient

    query = " and ".join([f"params.`parts.{part}` = '{uri}'" for part, uri in parts.items()]
                         + [f"params.features_version = '{features_version}'", f"params.decided_on = '{decided_on}'",
                            "attributes.status = 'FINISHED'"])
    runs = MlflowClient(tracking_uri=settings.mlflow_tracking_uri).search_runs(
        [tracking.experiment_id(settings, experiment)], filter_string=query, order_by=["attributes.start_time DESC"],
        max_results=1)
    if not runs:
        return None
    return EnsembleResult.from_dict(mlflow.artifacts.load_dict(f"runs:/{runs[0].info.run_id}/{RESULT_FILE}"))


def off_the_shelf_encoder(settings: Settings, like_uri: str) -> TextEncoder:
    """The packaged all-MiniLM-L6-v2 as a text encoder with the vocabulary of the model at ``like_uri`` (the
    reference every decision measures a trained model against; its vectors are the ensembles' MiniLM half's)."""
    like = load_encoder(like_uri, settings)
    return packaged_minilm(like.vocab, like.max_words, device=like.device)


def off_the_shelf_model(settings: Settings, like_uri: str, experiment: str = tracking.DEFAULT_EXPERIMENT,
                        tags: dict[str, str] | None = None) -> str:
    """The model URI of MiniLM off the shelf logged as a model of its own (``deepsent-minilm``), to ship when nothing
    trained beats it: the run an earlier call logged in ``experiment``, else a new one."""
    import mlflow
    from mlflow import MlflowClient

    runs = MlflowClient(tracking_uri=settings.mlflow_tracking_uri).search_runs(
        [tracking.experiment_id(settings, experiment)], order_by=["attributes.start_time DESC"], max_results=1,
        filter_string=f"tags.`deepsent.off_the_shelf` = '{OFF_THE_SHELF}' and attributes.status = 'FINISHED'")
    if runs:
        return tracking.model_uri_of(runs[0].info.run_id)
    encoder = off_the_shelf_encoder(settings, like_uri)
    with tracking.run(settings, experiment, run_name="minilm-off-the-shelf",
                      tags={**(tags or {}), "deepsent.off_the_shelf": OFF_THE_SHELF}):
        mlflow.log_params({"model": PARTS[1], "weights": OFF_THE_SHELF, "trained": "no"})
        return tracking.log_model(encoder.model, encoder.vocab, encoder.max_words)["model_uri"]
