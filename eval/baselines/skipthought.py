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
softmax over 20k words cost 13x more in ``bench/skipthought.py``), and
the GRUs run on packed sequences so padding costs nothing. Sentences are cut at ``max_len``
words for training. Training stops at ``max_steps`` (deterministic for a seed) or at
``max_minutes`` (a safety cap; ``meta.json`` says whether it was hit). See :data:`PROFILES`
and the report in ``meta.json`` for the sizes and what each profile reaches.

Scoring. Queries and titles are tokenised like the books (:func:`eval.books.word_tokens`);
words outside the vocabulary (model numbers, units) become ``<unk>``. A text with no word in
the vocabulary (empty or ``<unk>`` only) gets the zero vector, hence cosine 0 with anything.

The trained encoder is kept in the baselines' fit cache (:class:`~eval.baselines.model.FitCache`,
``cache/baselines/skipthought/<config-hash>/``: the encoder weights as arrays, the vocabulary and
the training report in ``meta.json``), so the comparison trains it once per configuration. The
network and its training loop are in :mod:`eval.baselines.skipthought_net`, imported only when
the baseline is fitted, so listing the baselines stays cheap.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Sequence

import numpy as np

from eval.baselines.base import FitContext
from eval.baselines.model import FitCache, cosine_pair_scores
from eval.books import BookCorpus, read_corpus, word_tokens
from eval.catalog import BaselineSpec
from pipeline import validators as v
from pipeline.defaults import SEED
from pipeline.errors import ConfigError

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIALS = (PAD, EOS, UNK)
#: Bump when the cached files change meaning (1: weights as arrays, vocabulary in meta.json).
CACHE_VERSION = 1


@dataclass(frozen=True)
class SkipThoughtConfig:
    """Sizes and budget of the skip-thought model (defaults: the ``default`` profile).

    Attributes:
        vocab_size: the most frequent book words kept (plus <pad>, <eos>, <unk>); 20k covers
            ~97.7 % of the corpus tokens.
        embed_dim: word embedding size (shared by encoder and decoders).
        hidden_dim: GRU state size, i.e. the sentence vector size (Kiros: 620 / 2400).
        max_len: words per training sentence (longer ones are cut; ~84 % of book sentences fit).
        batch_size: sentence triples per update.
        learning_rate: Adam step size (Kiros used Adam); ``grad_clip`` caps the gradient norm.
        cutoffs: adaptive-softmax cluster boundaries over frequency-ranked word ids.
        max_steps: updates to run (0 = until the clock runs out); training is deterministic
            for a seed when the steps bind. ``max_minutes`` is a wall-clock safety cap (on a
            busy machine it may bind first; ``meta.json`` records it and the steps reached).
        max_books / max_sentences: use only the first books / sentences (0 = all; for tests).
        seed: seeds the initial weights and the order of the triples.
        threads: torch CPU threads while training and encoding. 1 by default: on the shared
            2-core box, 2 threads were measured 8-12x *slower* per step than 1 under load
            (OpenMP threads spin at every barrier while the other core is busy).
    """

    vocab_size: int = 20000
    embed_dim: int = 128
    hidden_dim: int = 256
    max_len: int = 30
    batch_size: int = 64
    learning_rate: float = 2e-3
    grad_clip: float = 5.0
    cutoffs: tuple[int, ...] = (500, 4000)
    max_steps: int = 500
    max_minutes: float = 6.0
    max_books: int = 0
    max_sentences: int = 0
    seed: int = SEED
    threads: int = 1

    def key(self) -> str:
        """Short hash of every field: the cache folder of a model trained with this config."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


#: Named configurations (measured on the shared 2-core box under load: ~0.5 s per step):
#: ``quick`` fits the main job's quick run (<= 1 min of training plus ~15-35 s reading the
#: books), ``default`` ~5 min, ``full`` 3000 steps (~1/3 of an epoch; capped at 40 min).
PROFILES: dict[str, dict[str, Any]] = {
    "quick": {"max_steps": 100, "max_minutes": 1.0},
    "default": {},
    "full": {"max_steps": 3000, "max_minutes": 40.0},
}


def config_for(profile: str = "default", **overrides: Any) -> SkipThoughtConfig:
    """The config of a named profile, with ``overrides`` (non-None) applied."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown skip-thought profile {profile!r}; choose one of {sorted(PROFILES)}")
    values = {**PROFILES[profile], **{k: v for k, v in overrides.items() if v is not None}}
    if "cutoffs" in values:
        values["cutoffs"] = tuple(values["cutoffs"])
    return replace(SkipThoughtConfig(), **values)


def build_vocab(corpus: BookCorpus, size: int) -> list[str]:
    """Specials then the ``size`` most frequent words (ties by word), most frequent first."""
    counts = Counter(tok for sentence in corpus.sentences for tok in sentence)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:size]
    return [*SPECIALS, *(word for word, _ in ranked)]


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
