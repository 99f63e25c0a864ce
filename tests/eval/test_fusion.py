"""BM25 + model fusion: normalised linear mix with a weight fitted on click pairs only, and RRF (k = 60)."""
from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from encoders.search.fusion import click_mrr, fit_linear_weight, group_ranks, linear_fusion, normalise, reciprocal_rank_fusion
from eval.baselines.base import MODEL_URIS_KEY, FitContext
from eval.baselines.linear import LinearFusionScorer, fit_click_weight
from eval.baselines.rrf import RRFScorer
from eval.compare import compare
from pipeline.core.config import Settings
from pipeline.features.click_lists import valid_click_lists
from pipeline.features.feature_files import latest_version
from pipeline.storage.store import Store
from pipeline.text.homedepot import read_judgments
from tests.eval.stand_in import StandInEncoder


def _random_lists(rng: np.random.Generator, groups: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Scores with many ties (small integers) in groups of 2..9 rows."""
    sizes = rng.integers(2, 10, groups)
    return rng.integers(0, 4, sizes.sum()).astype(np.float64), np.repeat(np.arange(groups), sizes)


@pytest.mark.parametrize("seed", range(5))
def test_fusing_a_scorer_with_itself_ranks_exactly_as_the_scorer(seed: int) -> None:
    scores, group = _random_lists(np.random.default_rng(seed))
    expected = group_ranks(scores, group)
    for method in ("zscore", "minmax"):
        for weight in (0.0, 0.3, 0.5, 1.0):
            assert np.array_equal(group_ranks(linear_fusion(scores, scores, group, weight, method), group), expected)
    assert np.array_equal(group_ranks(reciprocal_rank_fusion([scores, scores], group), group), expected)


def test_rrf_on_a_hand_made_example() -> None:
    group = np.array([0, 0, 0, 1, 1])
    a = np.array([3.0, 2.0, 1.0, 5.0, 5.0])  # ranks 1 2 3 | 1 1 (tie shares the best rank)
    b = np.array([1.0, 3.0, 2.0, 0.0, 9.0])  # ranks 3 1 2 | 2 1
    fused = reciprocal_rank_fusion([a, b], group, k=60)
    expected = [1 / 61 + 1 / 63, 1 / 62 + 1 / 61, 1 / 63 + 1 / 62, 1 / 61 + 1 / 62, 1 / 61 + 1 / 61]
    assert np.allclose(fused, expected)
    assert group_ranks(fused, group).tolist() == [2, 1, 3, 2, 1]


def test_normalisation_is_per_group_and_a_constant_group_is_zero() -> None:
    group = np.array([0, 0, 1, 1, 1])
    scores = np.array([1.0, 3.0, 7.0, 7.0, 7.0])
    assert normalise(scores, group, "zscore").tolist() == [-1.0, 1.0, 0.0, 0.0, 0.0]
    assert normalise(scores, group, "minmax").tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]


def test_click_mrr_counts_ties_against_the_clicked_title() -> None:
    group = np.array([0, 0, 0, 1, 1, 1])
    clicked = np.array([True, False, False, True, False, False])
    result = click_mrr(np.array([2.0, 1.0, 0.0, 1.0, 1.0, 3.0]), group, clicked)
    assert result == {"mrr": pytest.approx((1 + 1 / 3) / 2), "hit@1": 0.5}


def test_the_weight_follows_whichever_scorer_finds_the_click() -> None:
    rng = np.random.default_rng(3)
    group = np.repeat(np.arange(50), 5)
    clicked = np.tile([True, False, False, False, False], 50)
    good = clicked + rng.normal(0, 0.1, group.size)
    noise = rng.normal(0, 1, group.size)
    fit = fit_linear_weight(good, noise, group, clicked)
    assert len(fit.curve) == 21 and fit.mrr == fit.curve[1.0] == 1.0 and fit.curve[0.0] < 0.6
    assert fit.weight > 0.5 and all(mrr < 1.0 for w, mrr in fit.curve.items() if w < fit.weight)  # smallest best w
    assert fit_linear_weight(noise, good, group, clicked).weight == 0.0


# ---- the linear baseline on real click pairs (tiny_features_store: random negatives, n = 4) ----------

@pytest.fixture()
def tiny_settings(tiny_features_store: Path, data_dir: Path) -> Settings:
    return Settings.from_env(store=str(tiny_features_store), data_dir=str(data_dir), dask_workers=1,
                             mlflow_tracking_uri=f"sqlite:///{tiny_features_store / 'unused.db'}")


def _ctx(settings: Settings, test_queries: list[str], test_titles: list[str]) -> FitContext:
    train = read_judgments(settings.train_judgments)
    titles = list(dict.fromkeys(train["title"].to_pylist()))
    return FitContext(settings=settings, store=Store.from_settings(settings), train_titles=titles,
                      train_queries=list(dict.fromkeys(train["query"].to_pylist())), test_titles=test_titles,
                      test_queries=test_queries, extra={MODEL_URIS_KEY: ["runs:/stand-in/model"]})


def test_click_lists_are_the_stored_valid_pairs_with_their_negatives(tiny_settings: Settings) -> None:
    store = Store.from_settings(tiny_settings)
    lists = valid_click_lists(store, latest_version(store))  # raises if a drawn negative differs from the shards
    valid = store.read_table("pairs/valid.parquet")
    assert lists.num_groups == valid.num_rows and len(lists.titles) == 5 * valid.num_rows
    clicked = {(q, t) for q, t in zip(valid["query"].to_pylist(), valid["title"].to_pylist())}
    assert {(q, t) for q, t, c in zip(lists.queries, lists.titles, lists.clicked) if c} == clicked
    assert not any((q, t) in clicked for q, t, c in zip(lists.queries, lists.titles, lists.clicked) if not c)


def test_the_fitted_weight_never_sees_the_judged_set(tiny_settings: Settings) -> None:
    assert not any("judg" in name or "test" in name for name in inspect.signature(fit_click_weight).parameters)
    dev = read_judgments(tiny_settings.dev_judgments)
    real = _ctx(tiny_settings, dev["query"].to_pylist()[:300], dev["title"].to_pylist()[:300])
    rng = np.random.default_rng(0)
    garbage = ["".join(rng.choice(list("qxzj "), 12)).strip() or "zz" for _ in range(300)]
    fake = _ctx(tiny_settings, garbage[:150], garbage[150:])
    weights = []
    version = latest_version(Store.from_settings(tiny_settings))
    for ctx in (real, fake):
        scorer = LinearFusionScorer(features=version, model_loader=lambda uri, settings: StandInEncoder())
        scorer.fit(ctx)
        weights.append((scorer.fitted.weight, scorer.fitted.curve))
        assert "by click MRR" in scorer.describe()["settings"]
    assert weights[0] == weights[1]


def test_fusion_scorers_rank_within_each_query(tiny_settings: Settings) -> None:
    dev = read_judgments(tiny_settings.dev_judgments).slice(0, 200)
    queries, titles = dev["query"].to_pylist(), dev["title"].to_pylist()
    ctx = _ctx(tiny_settings, queries, titles)
    version = latest_version(Store.from_settings(tiny_settings))
    for scorer in (LinearFusionScorer(features=version, model_loader=lambda u, s: StandInEncoder()),
                   RRFScorer(model_loader=lambda u, s: StandInEncoder())):
        scorer.fit(ctx)
        scores = scorer.score(queries, titles)
        assert scores.shape == (200,) and np.isfinite(scores).all()


def test_compare_reports_fusion_as_unavailable_without_a_model(settings: Settings, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "judged.csv"
    path.write_text("query,title,label\na b,a b c,2\na b,x y,0\nc d,c d e,1\nc d,z,0\n", encoding="utf-8")
    mlflow_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    result = compare(settings.with_overrides(mlflow_tracking_uri=mlflow_uri), judgments=path,
                     baselines=["bm25", "linear", "rrf"])
    assert [row["key"] for row in result.rows] == ["bm25"]
    assert set(result.unavailable) == {"linear", "rrf"} and "pass --models" in result.unavailable["linear"]


def test_fuse_ranked_by_hand() -> None:
    from encoders.search.fusion import fuse_ranked

    fused = fuse_ranked([[3, 1, 2], [1, 4]], k=60)
    # 1: 1/62 + 1/61, 3: 1/61, 4: 1/62, 2: 1/63
    assert [item for item, _ in fused] == [1, 3, 4, 2]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61) and fused[2][1] == pytest.approx(1 / 62)
    assert fuse_ranked([[5, 2], [5, 2]]) == [(5, 2 / 61), (2, 2 / 62)]  # one ranking twice ranks as it does
    assert fuse_ranked([[9], [7]]) == [(7, 1 / 61), (9, 1 / 61)]  # a tie goes by ascending id


@pytest.mark.heavy  # over 10 s: left out of make check
def test_served_rrf_equals_ranx_rrf() -> None:
    """The served rrf mode's reciprocal-rank fusion (``encoders.search.fusion.fuse_ranked``) scores every id as ranx's
    RRF does (k = 60), on random lists with overlaps; kept hand-written because it fuses row ids in the serving
    path without building ranx runs (a dict of dicts per query) for every search."""
    from ranx import Run, fuse

    from encoders.search.fusion import fuse_ranked

    rng = np.random.default_rng(3)
    for query in range(20):
        lists = [list(rng.choice(300, size=int(rng.integers(1, 100)), replace=False)) for _ in range(2)]
        runs = [Run({"q": {str(doc): float(len(ids) - rank) for rank, doc in enumerate(ids)}}) for ids in lists]
        theirs = fuse(runs, norm=None, method="rrf").to_dict()["q"]
        ours = dict(fuse_ranked(lists))
        assert set(theirs) == {str(d) for d in ours}
        for doc, score in ours.items():
            assert theirs[str(doc)] == pytest.approx(score, rel=1e-12)


def test_served_linear_is_ranx_wsum_when_both_first_stages_hold_every_candidate() -> None:
    """``linear`` scores the union of both first stages by both scorers; when each first stage already holds every
    candidate it is exactly ranx's min-max ``wsum`` with weights (w, 1 − w). Where they differ (a title found by
    one stage alone: ranx gives it 0 from the other), ``bench/search/fusion.py`` measured ours better."""
    from ranx import Run, fuse

    from encoders.search.modes import MODE, FirstStages

    rng = np.random.default_rng(5)
    titles = rng.standard_normal((60, 8))
    titles /= np.linalg.norm(titles, axis=1, keepdims=True)
    for query in range(10):
        vector, bm25 = rng.standard_normal(8), rng.uniform(0.5, 9.0, len(titles))
        rows = sorted(int(r) for r in rng.choice(len(titles), size=30, replace=False))
        cosines = titles[rows] @ (vector / np.linalg.norm(vector))
        stages = FirstStages(vector, [(r, float(c)) for r, c in zip(rows, cosines)], [(r, float(bm25[r])) for r in rows],
                             lambda rs: bm25[rs], lambda rs: titles[rs])
        runs = [Run({"q": {str(r): float(s) for r, s in zip(rows, scores)}}) for scores in (cosines, bm25[rows])]
        for weight in (0.2, 0.6):
            theirs = fuse(runs, norm="min-max", method="wsum", params={"weights": (weight, 1 - weight)}).to_dict()["q"]
            ours = {str(row): score for row, score, _ in MODE["linear"].hits(len(rows), stages, weight)}
            assert set(ours) == set(theirs)
            for doc, score in ours.items():
                assert theirs[doc] == pytest.approx(score, abs=1e-6)  # the served cosine is float32
