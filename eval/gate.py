"""The promotion gate: a challenger against the champion on a fixed gate set, in one paired comparison.

The default gate set is the held-out click lists of the run's ship features (each validation query's
clicked titles grade 1, the titles the log showed it and nobody clicked grade 0): clicks the models
never trained on, and never the judged set the comparison reports. A team with its own judged gate
set passes it instead (``--gate-judgments``).

Both models score the same judged pairs through the comparison's own machinery
(:func:`eval.compare.evaluate` with :class:`~eval.model_scorer.ModelScorer`), so the NDCG@1/3/10
(exponential gain, :mod:`eval.metrics`) and the paired t-test over queries
(:mod:`eval.significance`) are exactly those of ``deepsent compare``.

The gate also judges what is served (:func:`served_figures`): both models search the whole corpus on
the same held-out click queries (``pairs/valid.parquet``, never a judged set), each in the mode
``deepsent index`` would serve, its mode and linear weight chosen on one half of the queries and its
Recall@10 and NDCG@10 measured per query on the other.

The rule (:func:`decide`): promote when there is no champion, or when the challenger is not
significantly worse at any re-ranking cutoff nor at served NDCG@10, and has a higher re-ranking mean
on the chosen metric (NDCG@10 by default).

A gate set decides what ships; it is not for tuning: a model chosen by its gate figures is no
longer judged fairly by them. Models are tuned and early-stopped on held-out click pairs.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from eval.judgments import JudgedSet, load_judged_set
from eval.metrics import KS, NdcgResult
from eval.significance import ALPHA, compare_paired
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.core.textnorm import content_key

METRICS = tuple(f"ndcg@{k}" for k in KS)
DEFAULT_METRIC = "ndcg@10"
#: How the gate names a set of held-out click lists: ``click-lists:features/<version>``.
CLICK_GATE_PREFIX = "click-lists:features/"


@dataclass(frozen=True)
class GateDecision:
    """The gate's verdict with both models' figures (NDCG means in 0..1) and the p-value per cutoff."""

    promote: bool
    reason: str
    metric: str
    challenger: dict[str, float]
    champion: dict[str, float] | None
    p_values: dict[str, float]
    served: dict[str, Any] | None = None  # both models' served mode and whole-corpus figures, and the p-value

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {"promote": self.promote, "reason": self.reason, "metric": self.metric,
                "challenger": self.challenger, "champion": self.champion, "p_values": self.p_values,
                "served": self.served}


#: The cutoff of the served search's Recall and NDCG.
SERVED_K = 10


@dataclass(frozen=True)
class ServedFigures:
    """One model's served mode, its linear weight and its per-query Recall@10 and NDCG@10 on the judged half."""

    mode: str
    linear_weight: float
    corpus_titles: int
    recall: np.ndarray
    ndcg: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form: the mode, the weight, the means and the number of queries."""
        return {"mode": self.mode, "linear_weight": self.linear_weight, "recall@10": round(float(self.recall.mean()), 4),
                "ndcg@10": round(float(self.ndcg.mean()), 4), "queries": int(self.recall.size),
                "corpus_titles": self.corpus_titles}


def click_ndcg(found: list[str], clicked: set[str], k: int = SERVED_K) -> float:
    """NDCG@``k`` of one ranked list of doc ids, the ``clicked`` ones relevant (gain 1), the rest not."""
    dcg = sum(1.0 / np.log2(rank + 2) for rank, doc in enumerate(found[:k]) if doc in clicked)
    ideal = sum(1.0 / np.log2(rank + 2) for rank in range(min(k, len(clicked))))
    return dcg / ideal if ideal else 0.0


def served_figures(settings: Settings, scorers: list[Any], seed: int) -> list[ServedFigures] | None:
    """Each model's :class:`ServedFigures` on the store's held-out click queries (``scorers``: the models as
    :class:`~eval.model_scorer.ModelScorer`, already loaded by :func:`score_models`); None with fewer than two."""
    from encoders.search.bm25 import BM25Index
    from encoders.search.embed import corpus_titles
    from encoders.search.served_index import ServedIndex
    from encoders.search.served import choose_default_mode, halves, memoized, query_recall
    from eval.retrieval import corpus_of
    from pipeline.features.click_lists import held_out_clicks
    from pipeline.core.store import Store

    store = Store.from_settings(settings)
    clicks = held_out_clicks(store)
    if len(clicks) < 2:
        return None
    corpus = corpus_of(corpus_titles(settings, store)[0])
    bm25 = BM25Index()
    bm25.fit_corpus(corpus.titles)
    judged = list(halves(clicks)[1])  # choose_default_mode judges the modes on this half
    out = []
    for scorer in scorers:
        searcher = ServedIndex.in_memory(scorer, scorer.encode(corpus.titles, "doc"), corpus.doc_ids, corpus.titles, bm25)
        search = memoized(searcher.mode_search(list(clicks)))
        choice = choose_default_mode(search, clicks, SERVED_K)
        weight = float(choice.get("linear_weight", 0.5))
        found = search(judged, SERVED_K, choice["default_mode"], weight)
        out.append(ServedFigures(choice["default_mode"], weight, len(corpus.doc_ids),
                                 np.array([query_recall(f, clicks[q]) for q, f in zip(judged, found)]),
                                 np.array([click_ndcg(f, clicks[q]) for q, f in zip(judged, found)])))
    return out


def metric_cutoff(metric: str) -> int:
    """``ndcg@10`` -> 10; one of :data:`METRICS` or a ConfigError."""
    if metric not in METRICS:
        raise ConfigError(f"gate metric {metric!r} is not one of {', '.join(METRICS)}")
    return int(metric.split("@")[1])


def load_gate_set(settings: Settings, path: str | Path | None, features_version: str | None = None) -> JudgedSet:
    """The gate's judged set: the judged file ``path``, else the held-out click lists of ``features_version``;
    it must have graded queries for a paired test."""
    if path is not None:
        judged = load_judged_set(path)
        refuse_reported_set(settings, judged)
    elif features_version:
        judged = click_judged_set(settings, features_version)
    else:
        raise ConfigError("no gate set: give a judged set (--gate-judgments) or the features whose held-out click "
                          "lists gate (--gate-features)")
    judged.require_graded_queries()
    return judged


def judged_pairs(judged: JudgedSet) -> set[tuple[str, str]]:
    """The (query, title) pairs a judged set grades, both normalised: its content whatever its name, format,
    row order or labels."""
    return set(zip(judged.query, judged.title))


def content_pair(pair: tuple[str, str]) -> tuple[str, str]:
    """A judged (query, title) pair as its content: both texts by :func:`pipeline.core.textnorm.content_key`, so
    NFKC forms, case, punctuation and spacing do not tell two pairs apart."""
    return content_key(pair[0]), content_key(pair[1])


@lru_cache(maxsize=4)
def _reported_pairs(path: Path, size: int, mtime_ns: int) -> frozenset[tuple[str, str]]:
    """The :func:`content_pair` of every judged pair of the reported set at ``path`` (read once per version)."""
    return frozenset(map(content_pair, judged_pairs(load_judged_set(path))))


def refuse_reported_set(settings: Settings, judged: JudgedSet) -> None:
    """A ConfigError when ``judged`` grades any (query, title) pair of the set the comparison reports
    (``settings.dev_judgments``) once both are compared by content (:func:`content_pair`): a copy, a renamed,
    reordered, reformatted, relabelled or cosmetically edited copy, or a part of it. The training and dev
    judgments share no query, so a shared pair means the set was taken from the dev set."""
    reported = Path(settings.dev_judgments)
    if not reported.is_file():
        return
    stat = reported.stat()
    known = _reported_pairs(reported.resolve(), stat.st_size, stat.st_mtime_ns)
    pairs = judged_pairs(judged)
    shared = {pair for pair in pairs if content_pair(pair) in known}
    if shared:
        query, title = min(shared)
        raise ConfigError(f"--gate-judgments {judged.source}: {len(shared):,} of its {len(pairs):,} judged "
                          f"(query, title) pairs are judgments of {reported}, the set deepsent compare reports, once "
                          f"case, Unicode forms, punctuation and spacing are set aside (e.g. {query!r}, {title[:60]!r}); "
                          "the gate must not decide on the reported set: give a judged set of your own, or leave "
                          "--gate-judgments out to gate on held-out click lists")


def click_judged_set(settings: Settings, features_version: str) -> JudgedSet:
    """The held-out click lists of ``features_version`` as a judged set: per validation query, each clicked
    title grade 1 and each negative grade 0 (the validation queries never reach training)."""
    import numpy as np

    from eval.judgments import tie_ranks
    from pipeline.core.store import Store
    from pipeline.features.click_lists import valid_click_lists

    lists = valid_click_lists(Store.from_settings(settings), features_version)
    grade: dict[tuple[str, str], int] = {}
    for query, title, clicked in zip(lists.queries, lists.titles, lists.clicked.tolist()):
        grade[query, title] = max(grade.get((query, title), 0), int(clicked))
    qindex: dict[str, int] = {}
    queries = [q for q, _ in grade]
    titles = [t for _, t in grade]
    return JudgedSet(name="click-lists", source=f"{CLICK_GATE_PREFIX}{features_version}", fmt="clicks",
                     query_raw=queries, query=queries, title=titles, doc_id=titles,
                     label=np.fromiter(grade.values(), dtype=np.int64, count=len(grade)),
                     qid=np.fromiter((qindex.setdefault(q, len(qindex)) for q in queries), dtype=np.int64,
                                     count=len(queries)),
                     tie_rank=tie_ranks(titles))


def score_models(settings: Settings, judged: JudgedSet, scorers: list[Any]) -> list[NdcgResult]:
    """Per-query NDCG on ``judged`` of each model (a :class:`~eval.model_scorer.ModelScorer`, loaded here), scored as
    ``deepsent compare`` scores models."""
    from eval.baselines.base import FitContext
    from eval.compare import evaluate
    from pipeline.core.store import Store

    # A model learns nothing from the context: it only loads its weights.
    ctx = FitContext(settings=settings, store=Store.from_settings(settings), train_titles=[], train_queries=[],
                     test_titles=list(dict.fromkeys(judged.title)), test_queries=list(dict.fromkeys(judged.query)))
    return [evaluate(scorer.model_uri, scorer.model_uri, "model", scorer, ctx, judged).result for scorer in scorers]


def means(result: NdcgResult) -> dict[str, float]:
    """``{"ndcg@1": ..., "ndcg@3": ..., "ndcg@10": ...}`` of one model."""
    return {f"ndcg@{k}": result.mean(k) for k in KS}


def _figures(challenger: dict[str, float], champion: dict[str, float], p_values: dict[str, float]) -> str:
    return "; ".join(f"{m} {challenger[m]:.4f} vs {champion[m]:.4f} (p={p_values[m]:.3g})" for m in METRICS)


def served_record(served: list[ServedFigures] | None, seed: int) -> tuple[dict[str, Any] | None, bool, str]:
    """(both models' served figures with the paired p-value at NDCG@10, whether the challenger is significantly
    worse there, the figures as text) from :func:`served_figures` (challenger first)."""
    if not served:
        return None, False, ""
    record: dict[str, Any] = {"challenger": served[0].to_dict(), "champion": None, "p_value": None}
    text = f"served {served[0].mode} NDCG@10 {record['challenger']['ndcg@10']:.4f}"
    if len(served) < 2:
        return record, False, text
    test = compare_paired(served[0].ndcg, served[1].ndcg, seed=seed)
    record.update(champion=served[1].to_dict(), p_value=test.p_value)
    text += f" vs {served[1].mode} {record['champion']['ndcg@10']:.4f} (p={test.p_value:.3g})"
    return record, bool(test.significant(ALPHA) and test.mean_diff < 0), text


def decide(challenger: NdcgResult, champion: NdcgResult | None, metric: str = DEFAULT_METRIC,
           seed: int = SEED, served: list[ServedFigures] | None = None) -> GateDecision:
    """The gate rule on two models' per-query NDCG over the same queries, and on their served search
    (``served``: challenger first; see the module docstring)."""
    metric_cutoff(metric)
    ours = means(challenger)
    record, served_worse, served_text = served_record(served, seed)
    if champion is None:
        return GateDecision(True, "no champion yet", metric, ours, None, {}, record)
    theirs = means(champion)
    tests = {f"ndcg@{k}": compare_paired(challenger.valid(k), champion.valid(k), seed=seed) for k in KS}
    p_values = {m: t.p_value for m, t in tests.items()}
    figures = "; ".join(filter(None, [_figures(ours, theirs, p_values), served_text]))
    worse = [m for m, t in tests.items() if t.significant(ALPHA) and t.mean_diff < 0]
    worse += ["served NDCG@10"] if served_worse else []
    if worse:
        reason = f"significantly worse at {', '.join(worse)} (paired t-test, p < {ALPHA}): {figures}"
        return GateDecision(False, reason, metric, ours, theirs, p_values, record)
    if ours[metric] <= theirs[metric]:
        reason = f"not better at {metric}: {figures}"
        return GateDecision(False, reason, metric, ours, theirs, p_values, record)
    return GateDecision(True, f"better at {metric} and not significantly worse at any cutoff nor in served search: "
                        f"{figures}", metric, ours, theirs, p_values, record)
