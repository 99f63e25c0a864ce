"""What ``deepsent serve`` serves: one model's index opened and checked once, and where its pointers stand now.

Every import of the search layer (``encoders.search``) by the server is in this module, so a move there is one edit
here. A :class:`Loaded` is never changed once opened: a swap opens another beside it and the server switches by one
reference assignment, so a request keeps the object it started with.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deepsent.server.limits import CACHE_BYTES
from encoders.search.modes import MODES, Hit
from encoders.search.served_index import DenseFound, ServedIndex
from pipeline.core.config import Settings

__all__ = ["MODES", "Asked", "Found", "Hit", "Loaded", "Pointer", "open_loaded", "pointer_now"]

#: The query a freshly opened index answers once before it serves.
WARM_UP = "cordless drill"
#: One search's answer: per mode, per query, its hits (each shown as ``deepsent search --json`` prints it).
Found = dict[str, list[list[Hit]]]


@dataclass(frozen=True)
class Asked:
    """One request's search: its queries (checked and stripped), the titles each wants and the modes to answer in."""

    queries: list[str]
    k: int
    modes: tuple[str, ...]


@dataclass(frozen=True)
class Pointer:
    """Where the model URI and the index's ``current.json`` point: a registry version (or run) and its live build
    folder in the store (None: that version has no index yet)."""

    version: str
    build: str | None


class Loaded:
    """One opened index of one model version, searched by several threads at once (each with its own MiniLM infer
    request; the tokenizer and the BM25 cache guard themselves), describing itself the same way to every answer;
    concurrent requests' searches come in batches (:mod:`deepsent.server.batcher`, :meth:`search_many`)."""

    def __init__(self, index: ServedIndex, model_uri: str) -> None:
        self.index, self.model_uri = index, model_uri
        self.pointer = Pointer(index.version, index.root)
        self.build = index.build_id
        self.facts = {"model_uri": model_uri, "version": index.version, "build": self.build,
                      "model": index.manifest.get("model", ""), "index_type": index.manifest.get("index_type", ""),
                      "default_mode": index.default_mode, "titles": len(index.doc_ids)}

    @property
    def default_mode(self) -> str:
        """The mode chosen on the decision set when the index was built."""
        return self.index.default_mode

    def search(self, queries: list[str], k: int, modes: tuple[str, ...]) -> Found:
        """Per mode of ``modes``, per query, its top ``k`` hits (the records ``deepsent search --json`` prints): one
        search alone (:meth:`search_many` of it)."""
        return self.search_many([Asked(queries, k, modes)])[0]

    def search_many(self, asked: list[Asked]) -> list[Found]:
        """Each of ``asked`` answered as :meth:`search` answers it alone, byte for byte: every distinct query encoded
        once in shared live passes (a query's vector does not depend on the queries beside it), each asked of the
        index alone, then BM25 and each mode's fusion per query."""
        index = self.index
        texts = list(dict.fromkeys(query for one in asked for query in one.queries))
        vectors = dict(zip(texts, index.live_vectors(texts)))
        dense: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}  # (query, depth) -> its scores and rows

        def top(queries: list[str], depth: int) -> DenseFound:
            missing = list(dict.fromkeys(query for query in queries if (query, depth) not in dense))
            if missing:
                scores, rows = index.dense_alone(np.stack([vectors[query] for query in missing]), depth)
                dense.update({(query, depth): found for query, *found in zip(missing, scores, rows)})
            return np.stack([dense[q, depth][0] for q in queries]), np.stack([dense[q, depth][1] for q in queries])

        answers = []
        for one in asked:
            stacked = np.stack([vectors[query] for query in one.queries])
            found = {mode: index.hits(one.queries, one.k, mode, stacked, dense=top(one.queries, index.mode(mode).depth(
                one.k))) for mode in one.modes}
            answers.append({mode: [index.ranked(hits) for hits in per_query] for mode, per_query in found.items()})
        return answers


def open_loaded(settings: Settings, model_uri: str, reuse: Loaded | None = None,
                cache_bytes: int = CACHE_BYTES) -> Loaded:
    """The live build of ``model_uri``'s index, every file checked first, then searched once in every mode before it
    serves (a first search pays one-time costs, a compiled MiniLM's among them). ``reuse``: what is served now, whose
    encoder serves again when only the build changed; ``cache_bytes``: its BM25 cache's bound)."""
    index = ServedIndex.open(settings, model_uri, reuse=None if reuse is None else reuse.index)
    index.bm25_cache_bytes = cache_bytes
    loaded = Loaded(index, model_uri)
    loaded.search([WARM_UP], 1, MODES)
    return loaded


def pointer_now(settings: Settings, model_uri: str, served: Loaded | None) -> Pointer:
    """Where ``model_uri`` and its index point now, as the served index tells it
    (:meth:`~encoders.search.served_index.ServedIndex.live_build`: two small reads, the registry alias and
    ``current.json``)."""
    return Pointer(*ServedIndex.live_build(settings, model_uri, None if served is None else served.index))
