"""Skip-thought baseline: deterministic tiny training on the real books, store cache, scoring rules."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eval.baselines.base import FitContext
from eval.baselines.skipthought import SkipThoughtScorer, fit_cache
from eval.baselines.skipthought_config import PROFILES, config_for
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.storage.store import Store

#: A few hundred sentences of the first book and a tiny model: trains in about a second.
TINY = dict(
    max_books=1, max_sentences=300, vocab_size=400, embed_dim=16, hidden_dim=24,
    batch_size=16, max_steps=25, max_minutes=5.0, learning_rate=5e-3, cutoffs=(100, 250), threads=1,
)
QUERIES = ["the old man", "a dark night", "", "behr 2 gal. #ppu5-10 "]
TITLES = ["an old man", "the night was dark", "the old man", "the old man"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Settings, Store, SkipThoughtScorer]:
    """One tiny model trained into a local store, shared by the tests of this module."""
    settings = Settings.from_env(store=str(tmp_path_factory.mktemp("skipthought") / "store"), data_dir=str(data_dir))
    store = Store.from_settings(settings)
    return settings, store, fit_tiny(settings, store)


def fit_tiny(settings: Settings, store: Store, train_titles: list[str] | None = None) -> SkipThoughtScorer:
    """Fit the tiny config on ``store`` (Home Depot text given only to show it is ignored)."""
    titles = train_titles if train_titles is not None else ["hampton bay 3-light fixture"]
    ctx = FitContext(settings, store, titles, ["light fixture"], list(TITLES), list(QUERIES))
    scorer = SkipThoughtScorer(**TINY)
    scorer.fit(ctx)
    return scorer


def cache_folder(settings: Settings, store: Store) -> str:
    """Store folder of the tiny config's cached encoder."""
    return fit_cache(FitContext(settings, store, [], [], [], []), config_for(**TINY)).prefix


def encoder_bytes(settings: Settings, store: Store) -> bytes:
    return store.read_bytes(f"{cache_folder(settings, store)}/arrays.npz")


def test_two_trainings_are_identical_and_ignore_home_depot_text(tiny: tuple[Settings, Store, SkipThoughtScorer], tmp_path: Path) -> None:
    settings, store, first = tiny
    other = Store(str(tmp_path / "other-store"))
    second = fit_tiny(settings, other, train_titles=["completely different product titles", "x"] * 50)
    assert first.meta["loaded_from_cache"] is False and second.meta["loaded_from_cache"] is False
    assert encoder_bytes(settings, store) == encoder_bytes(settings, other)
    folder = cache_folder(settings, store)
    assert store.read_json(f"{folder}/meta.json")["vocab"] == other.read_json(f"{folder}/meta.json")["vocab"]
    np.testing.assert_array_equal(first.score(QUERIES, TITLES), second.score(QUERIES, TITLES))
    meta = first.meta
    assert meta["steps"] == 25 and meta["stopped_by_time_cap"] is False
    assert meta["final_loss"] < meta["first_loss"] - 0.5, meta["loss_curve"]
    assert meta["corpus"]["sentences"] == 300 and meta["triples_seen"] == 25 * 16


def test_cache_is_reused_and_scores_follow_the_rules(tiny: tuple[Settings, Store, SkipThoughtScorer]) -> None:
    settings, store, trained = tiny
    folder = cache_folder(settings, store)
    assert all(store.exists(f"{folder}/{name}") for name in ("arrays.npz", "meta.json"))
    loaded = fit_tiny(settings, store)
    assert loaded.meta["loaded_from_cache"] is True and loaded.describe()["cached"] is True
    scores = loaded.score(QUERIES, TITLES)
    np.testing.assert_array_equal(scores, trained.score(QUERIES, TITLES))
    assert scores.dtype == np.float64 and scores.shape == (4,)
    assert np.all(np.abs(scores) <= 1 + 1e-9)
    assert scores[2] == 0.0 and scores[3] == 0.0  # empty query; query of unknown words only
    assert loaded.score(["the old man"], ["the old man"])[0] == pytest.approx(1.0)
    vectors = loaded.encode(["", "zzqx 12-in.", "the night"])
    assert vectors.shape == (3, 24) and not vectors[:2].any() and vectors[2].any()
    described = loaded.describe()
    cfg = loaded.config
    n_words = trained.meta["vocab_words"]
    gru = 3 * (cfg.embed_dim * cfg.hidden_dim + cfg.hidden_dim * cfg.hidden_dim + 2 * cfg.hidden_dim)
    assert described["params"] == n_words * cfg.embed_dim + gru
    assert described["fit_seconds"] >= trained.meta["train_seconds"] > 0
    assert "hidden 24" in described["settings"] and "emb 16" in described["settings"]


def test_cache_in_s3_store(s3_settings: Settings) -> None:
    store = Store.from_settings(s3_settings)
    trained = fit_tiny(s3_settings, store)
    assert trained.meta["cache_uri"].startswith("s3://")
    loaded = fit_tiny(s3_settings, store)
    assert loaded.meta["loaded_from_cache"] is True
    np.testing.assert_array_equal(loaded.score(QUERIES, TITLES), trained.score(QUERIES, TITLES))


def test_profiles_and_options() -> None:
    assert config_for("quick").max_minutes <= 2.75  # + ~15 s reading the books: <= ~3 min
    assert config_for("quick").key() != config_for("default").key() != config_for("full").key()
    assert set(PROFILES) == {"quick", "default", "full"}
    assert config_for("default", hidden_dim=64).hidden_dim == 64
    with pytest.raises(ConfigError, match="unknown skip-thought profile"):
        SkipThoughtScorer(profile="huge")
    with pytest.raises(ConfigError, match="unknown option"):
        SkipThoughtScorer(hiden_dim=3)
    with pytest.raises(ConfigError, match="fit"):
        SkipThoughtScorer().score(["a"], ["b"])
