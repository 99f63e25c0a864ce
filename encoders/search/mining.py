"""Negatives mined from the corpus for retrieval training (``featurize --negative-source bm25|ann``).

For every query of a split (``pairs/{train,valid}.parquet``), the top :data:`DEPTH` titles of that
split's own titles by a first stage, less every title clicked for the query anywhere in the log (both
splits: a clicked title is no negative, so the known false negatives are out):

- ``bm25``: BM25 (:class:`~encoders.search.bm25.BM25Index`) over the split's titles;
- ``ann``: the previous champion's index (``deepsent index``; dense search over the whole corpus, kept to
  the split's titles), so a retrain mines against the model it must beat, refreshed once per retrain.

The chain's ``mine`` stage runs this for every mined source of the profile's grid (``featurize --negative-source``
does it for one); they are written as ``mined/<source>/{train,valid}.parquet`` in the skipped titles' schema (tier 2,
``shown`` = the rank the first stage gave), with a manifest; featurize then draws half of each pair's
negatives from its query's mined titles and the rest at random (:mod:`pipeline.features.negatives`), and
fingerprints the mined files into the features version. Random stays the default (Table IV's rows).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import pyarrow as pa

from pipeline.core.config import Settings
from pipeline.core.defaults import MINED_SOURCES
from pipeline.core.errors import ConfigError, InputError
from pipeline.features.feature_files import SPLITS
from pipeline.features.skipped import SHOWN
from pipeline.storage.schemas import SKIPPED_SCHEMA
from pipeline.storage.store import Store
from pipeline.storage.locations import folder

log = logging.getLogger(__name__)

MINED_ROOT = folder("mined")
#: Titles mined per query (before the clicked ones are removed).
DEPTH = 20
Ranker = Callable[[list[str], list[str]], list[list[int]]]  # (queries, pool titles) -> pool rows per query, best first


def mined_path(source: str, split: str) -> str:
    """The store path of the mined titles of ``split`` by ``source``."""
    return f"{MINED_ROOT}/{source}/{split}.parquet"


def _bm25_ranker(queries: list[str], titles: list[str]) -> list[list[int]]:
    """BM25's top :data:`DEPTH` pool rows of each query (positive scores only)."""
    from encoders.search.bm25 import BM25Index
    from encoders.search.modes import lexical_top

    index = BM25Index()
    index.fit_corpus(titles)
    return [[row for row, _ in lexical_top(index.corpus_scores(q), DEPTH)] for q in queries]


def _ann_ranker(settings: Settings, model_uri: str) -> Ranker:
    """The champion's dense top of each query over its whole index, kept to the pool's titles (best first)."""
    from encoders.search.served_index import ServedIndex

    searcher = ServedIndex.open(settings, model_uri)

    def rank(queries: list[str], titles: list[str]) -> list[list[int]]:
        row_of = {title: row for row, title in enumerate(titles)}
        found = searcher.hits(queries, DEPTH * 5, "dense")  # deeper: some of the top are other splits' titles
        ranked = [dict.fromkeys(row_of[searcher.titles[r]] for r, _, _ in hits if searcher.titles[r] in row_of) for hits in found]
        return [list(rows)[:DEPTH] for rows in ranked]

    return rank


def mine_negatives(settings: Settings, source: str, model_uri: str | None = None) -> dict[str, Any]:
    """Write ``mined/<source>/{train,valid}.parquet`` and its manifest; returns the manifest."""
    if source not in MINED_SOURCES:
        raise ConfigError(f"negatives are mined by {' or '.join(MINED_SOURCES)}, not {source!r}")
    store = Store.from_settings(settings)
    for split in SPLITS:
        if not store.exists(f"pairs/{split}.parquet"):
            raise ConfigError(f"{store.uri(f'pairs/{split}.parquet')}: no pairs to mine negatives for; run deepsent pairs first")
    pairs = {s: store.read_table(f"pairs/{s}.parquet", columns=["query", "doc_id", "title"]) for s in SPLITS}
    clicked = {(q, t) for table in pairs.values() for q, t in zip(table["query"].to_pylist(), table["title"].to_pylist())}
    if source == "ann":
        from encoders.model.ranker_registry import CHAMPION, RANKER

        model_uri = model_uri or f"models:/{RANKER}@{CHAMPION}"
        rank = _ann_ranker(settings, model_uri)
    else:
        rank = _bm25_ranker
    counts = {}
    for split, table in pairs.items():
        by_title = table.group_by("title").aggregate([("doc_id", "min")]).sort_by("title")
        titles, doc_ids = by_title["title"].to_pylist(), by_title["doc_id_min"].to_pylist()
        queries = sorted(set(table["query"].to_pylist()))
        rows: dict[str, list[Any]] = {name: [] for name in SKIPPED_SCHEMA.names}
        for query, ranked in zip(queries, rank(queries, titles)):
            for position, row in enumerate(ranked, 1):
                if (query, titles[row]) in clicked:
                    continue
                for name, value in zip(SKIPPED_SCHEMA.names, (query, "", doc_ids[row], titles[row], SHOWN, position, split)):
                    rows[name].append(value)
        store.write_table(mined_path(source, split), pa.table(rows, schema=SKIPPED_SCHEMA))
        counts[split] = {"queries": len(queries), "titles": len(titles), "mined": len(rows["query"]),
                         "queries_without": len(queries) - len(set(rows["query"]))}
        log.info("mined %s negatives for %s: %d titles for %d queries", source, split, counts[split]["mined"], len(queries))
    manifest = {"source": source, "depth": DEPTH, "model_uri": model_uri if source == "ann" else None, "counts": counts,
                "rule": "top titles of the split by the first stage, less every title clicked for the query in any split"}
    store.write_json(f"{MINED_ROOT}/{source}/manifest.json", manifest)
    return manifest


def mine_if_needed(settings: Settings, source: str, model_uri: str | None = None) -> dict[str, Any] | None:
    """Mine the corpus for ``source``'s negatives when it is a mined source (bm25, ann), and return the manifest
    (None for a source that mines nothing); a model to mine with is only for ann, and mining needs pairs in both
    splits and (ann, no model given) a champion."""
    if model_uri is not None and source != "ann":
        raise ConfigError(f"--mine-model-uri cannot be used with --negative-source {source}: it names the model whose "
                          "index mines --negative-source ann; bm25 mines with BM25, the other sources mine nothing")
    if source in MINED_SOURCES:
        _require_pairs_in_both_splits(settings, source)
        if source == "ann" and model_uri is None:
            _require_champion(settings)
        return mine_negatives(settings, source, model_uri)
    return None


def _require_pairs_in_both_splits(settings: Settings, source: str) -> None:
    """An InputError naming the split's pairs file when it has no pair to mine negatives for."""
    store = Store.from_settings(settings)
    for split in SPLITS:
        path = f"pairs/{split}.parquet"
        if store.exists(path) and store.read_table(path, columns=["query"]).num_rows == 0:
            raise InputError(store.uri(path), f"no {split} pairs: --negative-source {source} mines negatives for the "
                             "queries of each split; run deepsent pairs with a --valid-fraction that leaves pairs in both")


def _require_champion(settings: Settings) -> None:
    """A ConfigError naming --mine-model-uri when there is no champion whose index could mine ann negatives."""
    from encoders.model import ranker_registry as ranker
    from encoders.model.tracking import database_missing

    if database_missing(settings.mlflow_tracking_uri) or ranker.alias_version(ranker.client(settings),
                                                                               ranker.CHAMPION) is None:
        raise ConfigError(f"no champion: {ranker.CHAMPION_URI} is not set, so no index mines --negative-source ann; "
                          "pass --mine-model-uri URI or run deepsent promote")
