"""The stage functions of the chain (:data:`deepsent.chain.CHAIN`), one per stage, shared by both front doors.

Each takes the run (:class:`~deepsent.chain_results.ChainRun`) and the results it uses, named after the stages that
return them, and returns its typed result (its return annotation). What else it waits for follows from the datasets it
reads (:func:`deepsent.chain.build_chain`), so no parameter exists only to order it. The libraries they drive are
imported inside each function, so reading the chain stays light.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from typing import Any

from deepsent.chain_results import (ChainError, ChainRun, FeatureVersions, Ingested, Landing, Mined, Pairs,
                                    Published, negatives_key)
from deepsent.profiles import RANDOM, SKIPPED, ModelSpec
from encoders.search.results import EncodeResult, IndexResult
from encoders.training.results import EnsembleResult, TrainResult, select_best
from eval.results import CompareResult, PromotionResult, RetrievalCompareResult, ShipChoice
from pipeline.core.defaults import NEGATIVES

log = logging.getLogger("deepsent.run")

#: The held-out click lists the ship choice and the gate rank: n = 4, skipped titles as negatives.
SHIP_KEY = (NEGATIVES, SKIPPED)


def simulate(run: ChainRun) -> Landing:
    """The profile's days of simulated landing logs and catalogue (nothing when ``simulate_days`` is 0)."""
    from pipeline.simulate.simulate import simulate as simulate_days

    if run.simulate_days < 1:
        return Landing(dates=[], lines=0, partitions=[], summary="simulate: nothing (the landing area is filled by "
                       "the search engine)")
    result = simulate_days(run.settings, run.simulate_start, run.simulate_days, seed=run.seed)
    dates = [(run.simulate_start + dt.timedelta(days=i)).isoformat() for i in range(run.simulate_days)]
    churn = result.get("catalog_counts")
    catalog = (f"; a catalogue of {churn['snapshot_products']:,} products, then {churn['launches']:,} launches, "
               f"{churn['edits']:,} edits, {churn['retirements']:,} retirements" if churn else "")
    return Landing(dates=dates, lines=result["lines"], partitions=result["partitions"],
                   summary=f"simulated {len(dates)} day(s): {result['lines']:,} lines{catalog}")


def ingest(run: ChainRun, simulate: Landing) -> Ingested:
    """Ingest the simulated days, else the run's ``ingest_dates`` (nothing when there are none)."""
    from pipeline.ingest.ingest import COUNT_KEYS, ingest_dates

    dates = [dt.date.fromisoformat(d) for d in simulate.dates] or list(run.ingest_dates)
    if not dates:
        return Ingested(dates=[], counts={key: 0 for key in COUNT_KEYS}, summary="ingest: no day to (re)ingest")
    result = ingest_dates(run.settings, dates)
    counts = {key: int(result[key]) for key in COUNT_KEYS}
    return Ingested(dates=[d.isoformat() for d in dates], counts=counts,
                    summary=f"ingested {len(dates)} day(s): " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))


def pairs(run: ChainRun) -> Pairs:
    """Clicked pairs of every ingested day."""
    from pipeline.features.pairs import build_pairs

    result = build_pairs(run.settings, seed=run.seed)
    return Pairs(train_pairs=int(result["train_pairs"]), valid_pairs=int(result["valid_pairs"]),
                 outputs={k: str(v) for k, v in result["outputs"].items()}, summary=result.get("summary", ""))


def feature_keys(models: tuple[ModelSpec, ...]) -> list[tuple[int, str]]:
    """Every (n, negative source) the grid trains on, and the ship lists' key; non-random first."""
    return sorted({SHIP_KEY} | {(m.negatives, m.negative_source) for m in models}, key=lambda k: (k[1] == RANDOM, k))


def mine(run: ChainRun) -> Mined:
    """Mine the negatives of every mined source the grid trains on (bm25: BM25's top; ann: the champion's index's),
    once per source whatever the n; nothing when the grid mines none."""
    from encoders.search.mining import mine_if_needed

    mined = {}
    for source in dict.fromkeys(source for _, source in feature_keys(run.profile.models)):
        if (manifest := mine_if_needed(run.settings, source)) is not None:
            mined[source] = manifest["counts"]
    summary = "; ".join(f"{source}: {sum(c['mined'] for c in counts.values()):,} mined titles"
                        for source, counts in mined.items()) or "no mined negative source in the grid"
    return Mined(sources=mined, summary=summary)


def featurize(run: ChainRun) -> FeatureVersions:
    """The feature versions the grid and the ship choice need."""
    from pipeline.features.featurize import featurize as featurize_pairs

    keys = feature_keys(run.profile.models)
    versions = {}
    for n, source in keys:
        log.info("featurize n=%s%s", negatives_key(n, source), " (ship)" if (n, source) == SHIP_KEY else "")
        versions[negatives_key(n, source)] = featurize_pairs(run.settings, negatives=n, seed=run.seed,
                                                             negative_source=source).version
    return FeatureVersions(versions=versions, ship=versions[negatives_key(*SHIP_KEY)],
                           summary="features " + ", ".join(f"n={k}: {v}" for k, v in versions.items()))


def train_config(run: ChainRun, features: FeatureVersions, point: ModelSpec) -> Any:
    """The trainer's config of one grid point under the run's profile."""
    from encoders.training.trainer import TrainConfig

    extra = {k: v for k, v in (("lr", run.profile.lr), ("batch_size", run.profile.batch_size)) if v is not None}
    return TrainConfig(model=point.model, tower=dict(point.tower), negatives=point.negatives, epochs=point.epochs,
                       gamma=run.profile.gamma, patience=run.profile.patience, seed=run.seed, resume=run.resume,
                       features_version=features.version(point.negatives, point.negative_source), **extra)


def train(run: ChainRun, featurize: FeatureVersions, point: ModelSpec) -> TrainResult:
    """One grid point trained (an MLflow run, a registered model)."""
    from encoders.training.trainer import train as train_model

    return train_model(run.settings, train_config(run, featurize, point), tags=run.tags)


def best_trained(trained: list[TrainResult], specs: tuple[ModelSpec, ...]) -> TrainResult:
    """:func:`encoders.training.results.select_best` among the random-negative runs of the grid's most common n.

    MRR of the clicked title among 1 + n candidates rises as n falls, so runs are only compared
    with runs of the same n.
    """
    runs = [(result, spec) for result, spec in zip(trained, specs) if spec.negative_source == RANDOM]
    counts = [spec.negatives for _, spec in runs]
    usual_n = max(set(counts), key=counts.count)
    return select_best(result for result, spec in runs if spec.negatives == usual_n)


def best_of(trained: list[TrainResult], specs: tuple[ModelSpec, ...], model: str) -> TrainResult | None:
    """:func:`best_trained` among the runs of tower type ``model``; None when the grid has none."""
    runs = [(result, spec) for result, spec in zip(trained, specs) if spec.model == model]
    return best_trained([r for r, _ in runs], tuple(s for _, s in runs)) if runs else None


def _grid_results(run: ChainRun, train: list[TrainResult]) -> list[TrainResult]:
    """``train`` checked against the run's grid: one result per grid point, in grid order."""
    if len(train) != len(run.profile.models):
        raise ChainError(f"{len(train)} training results for a grid of {len(run.profile.models)} points")
    return list(train)


def ensemble(run: ChainRun, featurize: FeatureVersions, train: list[TrainResult]) -> EnsembleResult:
    """The best LSTM-RNN joined with MiniLM (the fine-tuned one when the grid trains it), the mix chosen on the
    decision set (the gate set, else the held-out click lists)."""
    from encoders.training.ensemble_build import build_ensemble
    from eval.decisions.gate_set import decision_set
    from eval.decisions.mix import MixDecider

    trained, specs = _grid_results(run, train), run.profile.models
    lstm, minilm = best_of(trained, specs, "lstm"), best_of(trained, specs, "minilm")
    if lstm is None:
            raise ChainError("the grid trained no LSTM-RNN, and the ensemble is built on one")
    decider = MixDecider(decision_set(run.settings, featurize.ship, run.gate), seed=run.seed)
    return build_ensemble(run.settings, lstm.model_uri, featurize.ship, decider,
                          minilm_uri=minilm.model_uri if minilm else None, tags=run.tags, resume=run.resume)


def _source_note(spec: ModelSpec) -> str:
    return "" if spec.negative_source == RANDOM else f" {spec.negative_source} negatives"


def train_label(spec: ModelSpec) -> str:
    """A grid point's label: tower type, tower config, n and the negatives' source when not random."""
    tower = "".join(f" {k}={v}" for k, v in spec.tower.items())
    return f"train {spec.model}{tower} n={spec.negatives}{_source_note(spec)}"


def candidate_label(name: str, spec: ModelSpec, specs: tuple[ModelSpec, ...]) -> str:
    """``name`` with the spec's n when the grid trains that tower at several n, and its negatives' source
    when they are not random."""
    same = [s for s in specs if s.model == spec.model and s.tower == spec.tower]
    return name + (f" n={spec.negatives}" if len(same) > 1 else "") + _source_note(spec)


def ship(run: ChainRun, featurize: FeatureVersions, train: list[TrainResult], ensemble: EnsembleResult) -> ShipChoice:
    """Every trained run and the ensemble against MiniLM off the shelf on the decision set: a trained model ships only
    when it beats MiniLM by more than the noise, else MiniLM off the shelf ships."""
    from eval.decisions.gate_set import decision_set
    from eval.shipping import choose_ship

    specs = run.profile.models
    candidates = [(candidate_label(r.name, s, specs), r.model_uri) for r, s in zip(_grid_results(run, train), specs)]
    candidates.append((ensemble.name, ensemble.model_uri))
    return choose_ship(run.settings, candidates, decision_set(run.settings, featurize.ship, run.gate),
                       featurize.ship, seed=run.seed, tags=run.tags)


def encode(run: ChainRun, ship: ShipChoice, shard: dict[str, int] | None = None) -> EncodeResult:
    """The shipped model's corpus title vectors, stored once for the gate, the index and the search stage: the
    shards with work on Dask (``deepsent run``), or the one ``shard`` of a mapped DAG task."""
    return corpus_encoded(run, ship.model_uri, shard)


def corpus_encoded(run: ChainRun, model_uri: str, shard: dict[str, int] | None) -> EncodeResult:
    """``model_uri``'s vectors of the corpus titles not stored yet: every shard (Dask), or the one ``shard``."""
    from encoders.search.corpus_shards import encode_corpus, encode_shard

    if shard is None:
        return encode_corpus(run.settings, model_uri)
    return encode_shard(run.settings, model_uri, shard["shard"], shard["of"])


def promote(run: ChainRun, featurize: FeatureVersions, ship: ShipChoice) -> PromotionResult:
    """The shipped model gated against the champion; a stale champion is notified (``DEEPSENT_NOTIFY``): a retrain
    that shipped MiniLM off the shelf again, the champion already, counts as refused."""
    from eval.promotion.promote import promote as promote_model
    from eval.promotion.status import BEATEN_TAG, OFF_THE_SHELF_TAG, report_if_stale

    beaten = {BEATEN_TAG: OFF_THE_SHELF_TAG, "deepsent.ship": ship.summary[:4000]} if ship.off_the_shelf else {}
    result = promote_model(run.settings, ship.model_uri, gate_judgments=run.gate, gate_features=featurize.ship,
                           force=run.force_promotion, tags={**run.tags, **beaten})
    stale = report_if_stale(run.settings, run.stale_after_refusals, run.stale_after_days, run.tags)
    return dataclasses.replace(result, stale=stale) if stale else result


def search(run: ChainRun, promote: PromotionResult) -> RetrievalCompareResult:
    """The champion's served search over the whole corpus (the catalogue plus the judged titles it lacks) beside
    BM25's, on the judged set (every served mode)."""
    from eval.retrieval.compare import judged_retrieval
    from encoders.model.ranker_registry import version_uri

    return judged_retrieval(run.settings.with_overrides(gate_judgments=run.gate), judgments=run.judgments, fmt=run.judgments_format,
                            models=[version_uri(promote.champion)], baselines=["bm25"], seed=run.seed)


def index(run: ChainRun, promote: PromotionResult) -> IndexResult:
    """The champion's index for ``deepsent search`` (FAISS over its stored title vectors, and BM25), published, its
    served mode chosen on the decision set's queries."""
    from encoders.model.ranker_registry import version_uri

    return corpus_indexed(run, version_uri(promote.champion))


def corpus_indexed(run: ChainRun, model_uri: str) -> IndexResult:
    """``model_uri``'s index built by the rule and published, its served mode chosen on the decision set's queries."""
    from encoders.search.served_index import ServedIndex
    from eval.decisions.gate_set import served_decision

    settings = run.settings.with_overrides(gate_judgments=run.gate)
    return ServedIndex.build(settings, model_uri, seed=run.seed, decision=served_decision(settings))


def compare(run: ChainRun, train: list[TrainResult], ensemble: EnsembleResult) -> CompareResult:
    """Every trained model and the ensemble against the profile's baselines on the judged set."""
    from eval.compare import compare as compare_models

    return compare_models(run.settings, judgments=run.judgments, fmt=run.judgments_format,
                          models=[r.model_uri for r in _grid_results(run, train)] + [ensemble.model_uri],
                          baselines=list(run.profile.baselines), seed=run.seed, tags=run.tags,
                          report_name=run.report_name)


def publish(run: ChainRun, compare: CompareResult, search: RetrievalCompareResult) -> Published:
    """The comparison's table files and the served-search table copied to ``reports/latest/`` (after the index stage:
    a run that publishes has its champion indexed)."""
    from pipeline.storage.locations import folder
    from pipeline.storage.store import Store

    store = Store.from_settings(run.settings)
    published = {name: store.write_bytes(f"{folder('latest')}/{name}", store.read_bytes(uri))
                 for name, uri in {**compare.report, **search.report}.items()}
    return Published(published=published, report_name=compare.report_name, mlflow_run_id=compare.mlflow_run_id,
                     summary=f"published {len(published)} table file(s) to {store.uri(folder('latest'))}")
