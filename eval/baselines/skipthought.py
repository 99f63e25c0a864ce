"""Skip-thought baseline (Kiros et al. 2015), trained on the shared public-domain novels.

A GRU encoder reads sentence ``s(i)``; two GRU decoders reconstruct ``s(i-1)`` and ``s(i+1)``
word by word (teacher forcing), each conditioned on the encoder's final state, which is
concatenated to the decoder input at every step (exactly Kiros' conditional GRU, whose gates
get an extra ``C h_i`` term). Word embeddings are shared by the encoder and both decoders; the
two decoders share one output layer. The paper (section V-B) used Kiros' combine-skip model
trained on BookCorpus off the shelf; here the uni-skip encoder is trained on the 97 novels of
``Settings.books_dir`` and then used the same way: encode query and title, score = cosine.
It never sees the Home Depot data. Kiros' combine-skip (uni- plus bi-skip) is not offered:
a second, bidirectional model would halve the training each one gets in the same budget.

CPU sizing. The decoder softmax over the vocabulary dominates the cost, so the output layer is
``torch.nn.AdaptiveLogSoftmaxWithLoss`` (Grave et al. 2017: frequent words in a small head,
rare ones in lower-dimensional tail clusters; exact log-likelihood, no sampling noise; a full
softmax over 20k words cost 13x more in ``bench/stages/skipthought.py``), and
the GRUs run on packed sequences so padding costs nothing. Sentences are cut at ``max_len``
words for training. Training stops at ``max_steps`` (deterministic for a seed) or at
``max_minutes`` (a safety cap; ``meta.json`` says whether it was hit). See :data:`PROFILES`
and the report in ``meta.json`` for the sizes and what each profile reaches.

Scoring. Queries and titles are tokenised like the books (:func:`eval.baselines.books.word_tokens`);
words outside the vocabulary (model numbers, units) become ``<unk>``. A text with no word in
the vocabulary (empty or ``<unk>`` only) gets the zero vector, hence cosine 0 with anything.

The trained encoder is kept in the baselines' fit cache (:class:`~eval.model_scorer.FitCache`,
``cache/baselines/skipthought/<config-hash>/``: the encoder weights as arrays, the vocabulary and
the training report in ``meta.json``), so the comparison trains it once per configuration. The
network and its training loop are in :mod:`eval.baselines.skipthought_net`, imported only when
the baseline is fitted, so listing the baselines stays cheap.
"""
from __future__ import annotations

import time
from dataclasses import asdict, fields
from typing import Any, Sequence

import numpy as np

from encoders.search.vectors import cosine_pair_scores
from eval.baseline_catalog import BaselineSpec
from eval.baselines.base import FitContext
from eval.baselines.books import read_corpus, word_tokens
from eval.baselines.fit_cache import FitCache
from eval.baselines.skipthought_config import PROFILES, UNK, SkipThoughtConfig, config_for
from pipeline.core import validators as v
from pipeline.core.errors import ConfigError

#: Bump when the cached files change meaning (1: weights as arrays, vocabulary in meta.json).
CACHE_VERSION = 1


def fit_cache(ctx: FitContext, cfg: SkipThoughtConfig) -> FitCache:
    """The store cache of the encoder trained with ``cfg`` (the books are fixed input, named by config)."""
    return FitCache(ctx.store, "skipthought", {**asdict(cfg), "version": CACHE_VERSION})


SPEC = BaselineSpec(name="skipthought", label="Skip-Thought off-the-shelf", cls="SkipThoughtScorer", order=5,
                    profiles={"quick": "profile=quick", "full": "profile=full"})


class SkipThoughtScorer:
    """Off-the-shelf skip-thought vectors: cosine of the book-trained encoder's query and title vectors.

    The config is ``config``, else the ``profile`` with keyword overrides (``skipthought:
    profile=quick`` in a comparison spec), else ``ctx.extra["profile"]`` at fit time, else
    ``default``.
    """

    name = "skipthought"
    OPTIONS = {"profile": v.choice(*PROFILES), "vocab_size": v.positive_int, "embed_dim": v.positive_int,
               "hidden_dim": v.positive_int, "max_len": v.positive_int, "batch_size": v.positive_int,
               "learning_rate": v.positive_float, "grad_clip": v.positive_float, "max_steps": v.non_negative_int,
               "max_minutes": v.positive_float, "max_books": v.non_negative_int, "max_sentences": v.non_negative_int,
               "seed": v.seed, "threads": v.positive_int}

    def __init__(self, profile: str | None = None, config: SkipThoughtConfig | None = None, **overrides: Any) -> None:
        unknown = sorted(set(overrides) - {f.name for f in fields(SkipThoughtConfig)})
        if unknown:
            raise ConfigError(f"skipthought: unknown option(s) {', '.join(unknown)}")
        if profile is not None:
            config_for(profile)  # fail early on an unknown profile name
        self._profile, self._overrides = profile, overrides
        self.config: SkipThoughtConfig | None = config
        self.meta: dict[str, Any] = {}
        self._index: dict[str, int] = {}
        self._encoder: Any = None
        self._fit_seconds = 0.0

    def fit(self, ctx: FitContext) -> None:
        """Load the cached encoder for the config, or train it on the books and cache it."""
        from eval.baselines import skipthought_net as net

        cfg = self.config or config_for(self._profile or str(ctx.extra.get("profile") or "default"), **self._overrides)
        began = time.perf_counter()
        cache = fit_cache(ctx, cfg)
        cached = cache.load()
        if cached is None:
            corpus = read_corpus(ctx.settings.books_dir, cfg.max_books, cfg.max_sentences)
            corpus_seconds = time.perf_counter() - began
            weights, vocab, meta = net.train(corpus, cfg)
            meta = {**meta, "corpus_seconds": round(corpus_seconds, 3), "vocab": vocab}
            meta["cache_uri"] = cache.save(weights, meta)
        else:
            weights, meta = cached
            vocab = meta["vocab"]
        load_seconds = time.perf_counter() - began if cached else 0.0
        self._encoder = net.encoder_from_weights(weights, len(vocab), cfg)
        report = {k: v for k, v in meta.items() if k != "vocab"}
        self.config, self.meta = cfg, {**report, "loaded_from_cache": cached is not None}
        self._index = {word: i for i, word in enumerate(vocab)}
        original = sum(float(meta.get(k, 0.0)) for k in ("corpus_seconds", "prepare_seconds", "train_seconds"))
        self._fit_seconds = original + load_seconds

    def encode(self, texts: Sequence[str], batch_size: int = 1024) -> np.ndarray:
        """``[N, hidden_dim]`` float32 sentence vectors; zero rows for texts with no known word."""
        if self._encoder is None or self.config is None:
            raise ConfigError("skipthought: call fit() before encode()/score()")
        from eval.baselines import skipthought_net as net

        unk = self._index[UNK]
        ids = [[self._index.get(t, unk) for t in word_tokens(text)] for text in texts]
        return net.encode(self._encoder, ids, unk, self.config.hidden_dim, self.config.threads, batch_size)

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """Cosine of the query and title vectors of each aligned pair (0 when either is zero)."""
        return cosine_pair_scores(lambda texts, _side: self.encode(texts), queries, titles)

    def describe(self) -> dict[str, Any]:
        """Sizes, encoder parameter count, seconds (original training + this load), cache use."""
        cfg, m = self.config or SkipThoughtConfig(), self.meta
        settings = (
            f"uni-skip GRU on {m.get('corpus', {}).get('books', '?')} books, vocab {m.get('vocab_words', '?')}, "
            f"emb {cfg.embed_dim}, hidden {cfg.hidden_dim}, maxlen {cfg.max_len}, batch {cfg.batch_size}, "
            f"{m.get('steps', '?')} steps ({m.get('triples_seen', '?')} triples), final loss {m.get('final_loss', float('nan')):.2f}"
        )
        return {
            "settings": settings,
            "params": int(m.get("params_encoder", 0)) or None,
            "fit_seconds": round(self._fit_seconds, 3),
            "cached": bool(m.get("loaded_from_cache", False)),
        }
