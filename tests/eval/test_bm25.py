"""BM25 (bm25s): scores computed by hand on a tiny corpus, and parity with rank_bm25 on real titles."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from eval.baselines.bm25 import BM25Scorer
from eval.judgments import load_judged_set
from pipeline.core.errors import ConfigError

CORPUS = ["red drill", "blue saw saw", "red saw"]


def test_lucene_scores_by_hand() -> None:
    scorer = BM25Scorer(k1=1.2, b=0.75)
    scorer.fit_corpus(CORPUS)
    scores = scorer.score(["red saw"] * 3 + ["drill"], CORPUS + ["red saw"])
    avgdl = 7 / 3
    idf2 = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # "red" and "saw" are each in 2 of 3 titles

    def tf_part(tf: int, dl: int) -> float:
        return tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))

    expected = [
        idf2 * tf_part(1, 2),  # "red drill": red
        idf2 * tf_part(2, 3),  # "blue saw saw": saw twice
        idf2 * tf_part(1, 2) * 2,  # "red saw": both words
        0.0,  # "drill" does not occur in "red saw"
    ]
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
    assert scores[2] > scores[1] > scores[0]


def test_unknown_query_words_score_zero_and_unindexed_titles_are_refused() -> None:
    scorer = BM25Scorer()
    scorer.fit_corpus(CORPUS)
    assert scorer.score(["chainsaw"], ["red saw"]).tolist() == [0.0]
    with pytest.raises(ConfigError, match="not in the indexed corpus"):
        scorer.score(["red"], ["green saw"])


@pytest.mark.parametrize(
    ("method", "kwargs", "reference"),
    [("atire", {"idf_method": "robertson"}, "BM25Okapi"), ("bm25+", {}, "BM25Plus")],
)
def test_parity_with_rank_bm25_on_real_titles(settings, method: str, kwargs: dict, reference: str) -> None:
    import rank_bm25

    judged = load_judged_set(settings.dev_judgments)
    titles = list(dict.fromkeys(judged.title))[:300]
    docs = [t.split() for t in titles]
    # rank_bm25's Okapi pairs ATIRE's tf part with Robertson's idf, floored for words in over half
    # the titles (bm25s clamps those to 0): compare on queries without such words.
    df = Counter(w for d in docs for w in set(d))
    queries = [q for q in dict.fromkeys(judged.query) if reference == "BM25Plus" or all(2 * df[w] < len(docs) for w in q.split())]
    assert len(queries) >= 100
    ours = BM25Scorer(k1=1.5, b=0.75, method=method, delta=1.0, **kwargs)
    ours.fit_corpus(titles)
    ref = getattr(rank_bm25, reference)(docs, k1=1.5, b=0.75, **({"delta": 1.0} if reference == "BM25Plus" else {}))
    matched = 0
    for query in queries[:100]:
        expected = ref.get_scores(query.split())
        got = ours.score([query] * len(titles), titles)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
        matched += int(np.count_nonzero(got))
    assert matched > 500  # the comparison covers many non-zero scores, not just empty matches
