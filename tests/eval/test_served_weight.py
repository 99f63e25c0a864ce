"""The linear weight a job's retrieval table measures is the one the gate fits and the index serves."""
from __future__ import annotations

import numpy as np

from encoders.search.bm25 import BM25Index
from encoders.search.served_index import ServedIndex
from encoders.search.served import DecisionQueries, choose_default_mode, fit_linear_weight, halves
from eval.retrieval.served import fitted_linear_weight, served_choice

DIM, DECOYS = 64, 10


class _Encoder:
    """Fixed vectors for the planted texts (what a model's towers would return)."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def encode(self, texts: list[str], kind: str) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


def _planted(kinds: list[str]) -> tuple[list[str], dict[str, np.ndarray], dict[str, set[str]]]:
    """Titles, vectors and held-out clicks where ``lexical`` queries need a small cosine weight (the cosine points
    at ten decoys that BM25 also finds, less well) and ``dense`` queries a large one (BM25 points at ten decoys)."""
    rng = np.random.default_rng(0)
    titles, vectors, clicks = [], {}, {}
    for q, kind in enumerate(kinds):
        v = rng.standard_normal(DIM)
        query, hit = f"query{q}", f"title{q}"
        if kind == "lexical":  # BM25 finds the clicked title alone; the cosine prefers the decoys
            filler = " ".join(f"filler{q}x{w}" for w in range(8))  # a longer title: a weaker BM25 match
            hit_title, hit_vector, decoys = f"{hit} query{q}", -v, [(f"decoy{q}x{d} query{q} {filler}",
                                                                     v + 0.01 * rng.standard_normal(DIM))
                                                                    for d in range(DECOYS)]
        else:  # the cosine finds the clicked title; BM25 prefers the decoys
            hit_title, hit_vector, decoys = hit, v, [(f"decoy{q}x{d} query{q}", -v + 0.01 * rng.standard_normal(DIM))
                                                     for d in range(DECOYS)]
        for title, vector in [(hit_title, hit_vector), *decoys]:
            titles.append(title)
            vectors[title] = vector
        vectors[query] = v
        clicks[query] = {str(len(titles) - DECOYS - 1)}  # the clicked title's doc id is its row
    return titles, vectors, clicks


def test_the_retrieval_rows_fit_the_weight_on_the_gates_half() -> None:
    # the first half is lexical, the other dense: a weight fitted on the other half would differ
    titles, vectors, clicks = _planted(["lexical"] * 11 + ["dense"] * 11)
    encoder = _Encoder(vectors)
    title_vectors = encoder.encode(titles, "doc")
    bm25 = BM25Index()
    bm25.fit_corpus(titles)
    doc_ids = [str(i) for i in range(len(titles))]
    searcher = ServedIndex.in_memory(encoder, title_vectors, doc_ids, titles, bm25)
    search = searcher.mode_search(list(clicks))

    decision = DecisionQueries.of_clicks(clicks)
    chosen = choose_default_mode(search, decision)
    served = chosen["linear_weight"]
    measured = fitted_linear_weight(searcher, decision)
    assert measured == served
    # the table's rows (compare --retrieval, the search stage) take this weight and mark the mode the index serves
    assert served_choice(searcher, decision) == {"linear_weight": served, "default_mode": chosen["default_mode"]}
    other = halves(decision.relevant)[1]
    assert fit_linear_weight(search, other) != served  # the planted halves disagree, so the test can fail
