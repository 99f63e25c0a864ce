"""The decision set: the judged set every decision of the chain is made on, read through one function.

:func:`decision_set` reads the gate setting (``Settings.gate_judgments``: ``DEEPSENT_GATE_JUDGMENTS``,
``--gate-judgments``, the DAG's ``gate_judgments`` param) and gives the ensemble's mix, the ship choice, the
promotion gate and (as :func:`served_decision`) the index's served mode the same set:

- ``gate-slice`` (the default): the demo's golden set, the queries of ``judgments_train.csv`` that
  :func:`pipeline.text.homedepot.is_gate_query` puts in the slice, which the click simulator never reads;
- a judged file of the team's own (either judged-set format), refused with one line when it shares a query with the
  reported dev set or with the simulator's source (or a judged pair with the dev set, however cosmetically edited);
- ``clicks``: no judged gate set, the held-out click lists of the ship features decide (each validation query's
  clicked titles grade 1, the titles the log showed it and nobody clicked grade 0).

Every decision's summary names the set that decided (:attr:`DecisionSet.signal`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from encoders.search.served import DecisionQueries
from eval.judgments import JudgedSet, homedepot_set, load_judged_set
from pipeline.core.config import Settings
from pipeline.core.defaults import GATE_CLICKS, GATE_SLICE
from pipeline.core.errors import ConfigError
from pipeline.text.homedepot import is_gate_query
from pipeline.text.textnorm import content_key

#: How the gate names a set of held-out click lists: ``click-lists:features/<version>``.
CLICK_GATE_PREFIX = "click-lists:features/"


@dataclass(frozen=True)
class DecisionSet:
    """The judged set the chain decides on, what it is (``signal``, for every summary) and whether it is a judged
    gate set (``gate``) or the held-out click lists."""

    judged: JudgedSet
    signal: str
    gate: bool


def decision_set(settings: Settings, features_version: str | None = None, gate: str | None = None) -> DecisionSet:
    """The decision set of ``gate`` (default the settings' gate setting); the click lists of ``features_version``
    (default the ship features) when the setting is ``clicks``. It must have two graded queries for a paired test."""
    gate = gate or settings.gate_judgments
    if gate == GATE_CLICKS:
        if not features_version:
            from pipeline.features.feature_lookup import ship_features_version

            features_version = ship_features_version(settings)
        judged = click_judged_set(settings, features_version)
        signal = f"held-out click lists of features {features_version} ({judged.num_queries:,} queries)"
    else:
        judged = gate_slice(settings) if gate == GATE_SLICE else load_judged_set(gate)
        refuse_reported_set(settings, judged)
        refuse_shared_queries(settings, judged)
        signal = f"gate set {judged.name} ({judged.num_queries:,} judged queries)"
    judged.require_graded_queries()
    return DecisionSet(judged, signal, gate != GATE_CLICKS)


def gate_decision_set(settings: Settings, path: str | Path | None, features_version: str | None = None) -> DecisionSet:
    """The promotion gate's decision set: the judged file ``path`` (or ``gate-slice``), else the held-out click lists
    of ``features_version`` when given, else the settings' gate set (:func:`decision_set`)."""
    gate = str(path) if path is not None else (GATE_CLICKS if features_version else None)
    return decision_set(settings, features_version, gate)


def load_gate_set(settings: Settings, path: str | Path | None, features_version: str | None = None) -> JudgedSet:
    """The judged set of :func:`gate_decision_set`."""
    return gate_decision_set(settings, path, features_version).judged


def gate_slice(settings: Settings) -> JudgedSet:
    """The demo's gate set: the rows of the training judgments whose query is in the gate slice."""
    path = settings.train_judgments
    if not path.is_file():
        raise ConfigError(f"gate set {GATE_SLICE}: {path} is not there (it is cut from the training judgments); "
                          f"give a judged set of your own (DEEPSENT_GATE_JUDGMENTS=PATH) or {GATE_CLICKS}")
    return homedepot_set(path, keep=is_gate_query, name=GATE_SLICE)


def served_decision(settings: Settings, features_version: str | None = None,
                    chosen: DecisionSet | None = None) -> DecisionQueries:
    """The queries the served mode is chosen on: the gate set's (``chosen`` when the caller read it already), each
    with its titles' gains by doc id (2^grade - 1, the catalogue's product ids), or the held-out click queries when
    the setting is ``clicks``."""
    if settings.gate_judgments == GATE_CLICKS:
        from pipeline.storage.store import Store
        from pipeline.features.click_lists import held_out_clicks

        return DecisionQueries.of_clicks(held_out_clicks(Store.from_settings(settings)))
    chosen = chosen or decision_set(settings, features_version)
    relevant: dict[str, dict[str, float]] = {}
    for query, doc, label in zip(chosen.judged.query, chosen.judged.doc_id, chosen.judged.label.tolist()):
        if label > 0:
            relevant.setdefault(query, {})[doc] = float(2 ** label - 1)
    return DecisionQueries(relevant, chosen.signal)


def refuse_shared_queries(settings: Settings, judged: JudgedSet) -> None:
    """A ConfigError when a query of the gate set ``judged`` (by content) is a query of the reported dev set or of
    the click simulator's source (the training judgments outside the gate slice): a gate set must be disjoint from
    every reported set and from what the towers learn from."""
    ours = {content_key(q): q for q in dict.fromkeys(judged.query_raw)}
    for path, label, keep in ((settings.dev_judgments, "the reported dev set", None),
                              (settings.train_judgments, "the click simulator's source", is_gate_query)):
        if not Path(path).is_file():
            continue
        stat = Path(path).stat()
        shared = sorted(set(ours) & _queries_of(Path(path).resolve(), stat.st_size, stat.st_mtime_ns, keep is not None))
        if shared:
            raise ConfigError(f"gate set {judged.source}: {len(shared):,} of its {len(ours):,} queries are queries of "
                              f"{path} ({label}), e.g. {ours[shared[0]]!r}; a gate set must share no query with it")


@lru_cache(maxsize=4)
def _queries_of(path: Path, size: int, mtime_ns: int, outside_slice: bool) -> frozenset[str]:
    """The content keys of a judged file's queries (only those outside the gate slice with ``outside_slice``)."""
    judged = load_judged_set(path)
    return frozenset(content_key(q) for q in set(judged.query_raw) if not (outside_slice and is_gate_query(q)))


def judged_pairs(judged: JudgedSet) -> set[tuple[str, str]]:
    """The (query, title) pairs a judged set grades, both normalised: its content whatever its name, format,
    row order or labels."""
    return set(zip(judged.query, judged.title))


def content_pair(pair: tuple[str, str]) -> tuple[str, str]:
    """A judged (query, title) pair as its content: both texts by :func:`pipeline.text.textnorm.content_key`, so
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
                          "--gate-judgments out to gate on the gate slice")


def click_judged_set(settings: Settings, features_version: str) -> JudgedSet:
    """The held-out click lists of ``features_version`` as a judged set: per validation query, each clicked
    title grade 1 and each negative grade 0 (the validation queries never reach training)."""
    import numpy as np

    from eval.judgments import tie_ranks
    from pipeline.storage.store import Store
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


