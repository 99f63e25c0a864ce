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

The trained encoder is cached in the store under ``cache/skipthought/<config-hash>/``
(``encoder.pt``, ``vocab.json``, ``meta.json``; ``meta.json`` is written last and marks a
complete cache), so the comparison trains it once per configuration.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import time
from collections import Counter
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Sequence

import numpy as np

from eval.baselines.base import FitContext, register
from eval.baselines.model import cosine_pair_scores
from eval.books import BookCorpus, read_corpus, word_tokens
from pipeline import validators as v
from pipeline.errors import ConfigError
from pipeline.store import Store

log = logging.getLogger(__name__)

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIALS = (PAD, EOS, UNK)
CACHE_PREFIX = "cache/skipthought"


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
    seed: int = 7
    threads: int = 1

    def key(self) -> str:
        """Short hash of every field: the cache folder of a model trained with this config."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


#: Named configurations (measured on the shared 2-core box under load: ~0.5 s per step):
#: ``quick`` fits the main job's quick run (<= 2.5 min of training plus ~15-35 s reading the
#: books), ``default`` ~5 min, ``full`` 3000 steps (~1/3 of an epoch; capped at 40 min).
PROFILES: dict[str, dict[str, Any]] = {
    "quick": {"max_steps": 200, "max_minutes": 2.5},
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


def _modules():  # torch is imported lazily: importing the baseline registry stays cheap
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence

    class Encoder(nn.Module):
        """Word embeddings + GRU; the sentence vector is the state after the last word."""

        def __init__(self, n_words: int, embed_dim: int, hidden_dim: int) -> None:
            super().__init__()
            self.embed = nn.Embedding(n_words, embed_dim, padding_idx=0)
            self.gru = nn.GRU(embed_dim, hidden_dim, batch_first=True)

        def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            packed = pack_padded_sequence(self.embed(ids), lengths, batch_first=True, enforce_sorted=False)
            return self.gru(packed)[1][-1]

    class SkipThought(nn.Module):
        """Encoder, previous/next-sentence decoders and their shared adaptive softmax."""

        def __init__(self, n_words: int, cfg: SkipThoughtConfig) -> None:
            super().__init__()
            self.encoder = Encoder(n_words, cfg.embed_dim, cfg.hidden_dim)
            cond = cfg.embed_dim + cfg.hidden_dim
            self.decoders = nn.ModuleList([nn.GRU(cond, cfg.hidden_dim, batch_first=True) for _ in range(2)])
            cutoffs = [c for c in cfg.cutoffs if c < n_words - 1]
            self.output = nn.AdaptiveLogSoftmaxWithLoss(cfg.hidden_dim, n_words, cutoffs, head_bias=True)

        def decode_loss(self, which: int, thought: torch.Tensor, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            """Mean NLL of sentence ``ids`` (then <eos>) given ``thought``, teacher-forced."""
            steps = lengths + 1  # <eos> is both the start symbol and the final target
            start = torch.full_like(ids[:, :1], SPECIALS.index(EOS))
            inputs = torch.cat([start, ids], dim=1)
            targets = torch.cat([ids, torch.zeros_like(start)], dim=1)
            targets[torch.arange(ids.shape[0]), lengths] = SPECIALS.index(EOS)
            emb = self.encoder.embed(inputs)
            cond = torch.cat([emb, thought.unsqueeze(1).expand(-1, emb.shape[1], -1)], dim=2)
            packed = pack_padded_sequence(cond, steps, batch_first=True, enforce_sorted=False)
            hidden = self.decoders[which](packed)[0].data
            gold = pack_padded_sequence(targets, steps, batch_first=True, enforce_sorted=False).data
            return self.output(hidden, gold).loss

        def forward(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
            prev_ids, prev_len, ids, lengths, next_ids, next_len = batch
            thought = self.encoder(ids, lengths)
            return self.decode_loss(0, thought, prev_ids, prev_len) + self.decode_loss(1, thought, next_ids, next_len)

    return torch, Encoder, SkipThought


class _Threads:
    """Context manager: torch uses ``n`` CPU threads inside, the previous number after."""

    def __init__(self, torch: Any, n: int) -> None:
        self.torch, self.n, self.before = torch, n, 0

    def __enter__(self) -> None:
        self.before = self.torch.get_num_threads()
        self.torch.set_num_threads(max(1, self.n))

    def __exit__(self, *exc: object) -> None:
        self.torch.set_num_threads(self.before)


def _padded(torch: Any, flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, rows: np.ndarray, max_len: int) -> tuple[Any, Any]:
    """Sentences ``rows`` of the flat id array as a zero-padded ``[B, T]`` tensor and their lengths."""
    lens = np.minimum(lengths[rows], max_len)
    cols = np.arange(int(lens.max()))
    mask = cols[None, :] < lens[:, None]
    ids = np.where(mask, flat[np.where(mask, starts[rows, None] + cols[None, :], 0)], 0)
    return torch.from_numpy(ids), torch.from_numpy(lens)


def train(corpus: BookCorpus, cfg: SkipThoughtConfig) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """Train on the corpus triples; returns the encoder's state dict, the vocabulary and a report."""
    torch, _, SkipThought = _modules()
    prepare_began = time.perf_counter()
    vocab = build_vocab(corpus, cfg.vocab_size)
    index = {word: i for i, word in enumerate(vocab)}
    unk = index[UNK]
    lengths = np.fromiter((len(s) for s in corpus.sentences), dtype=np.int64, count=len(corpus.sentences))
    starts = np.cumsum(lengths) - lengths
    flat = np.fromiter((index.get(t, unk) for s in corpus.sentences for t in s), dtype=np.int64, count=int(lengths.sum()))
    batch_size = min(cfg.batch_size, len(corpus.centres))
    rng = np.random.default_rng(cfg.seed)
    order, cursor, epochs, losses, capped = rng.permutation(corpus.centres), 0, 0, [], False
    prepare_seconds = time.perf_counter() - prepare_began
    with _Threads(torch, cfg.threads):
        torch.manual_seed(cfg.seed)
        model = SkipThought(len(vocab), cfg)
        optimiser = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
        began = time.perf_counter()
        while not cfg.max_steps or len(losses) < cfg.max_steps:
            if losses and time.perf_counter() - began > 60.0 * cfg.max_minutes:
                capped = True
                break
            if cursor + batch_size > len(order):
                order, cursor, epochs = rng.permutation(corpus.centres), 0, epochs + 1
            centres, cursor = order[cursor:cursor + batch_size], cursor + batch_size
            batch = tuple(t for shift in (-1, 0, 1) for t in _padded(torch, flat, starts, lengths, centres + shift, cfg.max_len))
            loss = model(batch)
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimiser.step()
            losses.append(float(loss.item()))
            if len(losses) % 200 == 1:
                log.info("skipthought step %d loss %.3f (%.0f s)", len(losses), losses[-1], time.perf_counter() - began)
        seconds = time.perf_counter() - began
    steps = len(losses)
    chunk = max(1, steps // 20)
    meta = {
        "config": asdict(cfg),
        "config_key": cfg.key(),
        "vocab_words": len(vocab),
        "prepare_seconds": round(prepare_seconds, 3),
        "train_seconds": round(seconds, 3),
        "steps": steps,
        "epochs_completed": epochs,
        "stopped_by_time_cap": capped,
        "triples_seen": steps * batch_size,
        "sentences_seen": 3 * steps * batch_size,
        "triples_per_second": round(steps * batch_size / max(seconds, 1e-9), 1),
        "first_loss": float(np.mean(losses[:chunk])),
        "final_loss": float(np.mean(losses[-chunk:])),
        "loss_curve": [round(float(np.mean(losses[i:i + chunk])), 4) for i in range(0, steps, chunk)],
        "params_encoder": sum(p.numel() for p in model.encoder.parameters()),
        "params_total": sum(p.numel() for p in model.parameters()),
        "corpus": dict(corpus.stats),
        "torch": torch.__version__,
    }
    return model.encoder.state_dict(), vocab, meta


def cache_dir(cfg: SkipThoughtConfig) -> str:
    """Store folder of the model trained with ``cfg``."""
    return f"{CACHE_PREFIX}/{cfg.key()}"


def save_cached(store: Store, cfg: SkipThoughtConfig, state: dict[str, Any], vocab: list[str], meta: dict[str, Any]) -> str:
    """Write encoder weights, vocabulary, then ``meta.json`` (the completion marker); returns the folder URI."""
    import torch

    buffer = io.BytesIO()
    torch.save(state, buffer)
    folder = cache_dir(cfg)
    store.write_bytes(f"{folder}/encoder.pt", buffer.getvalue())
    store.write_json(f"{folder}/vocab.json", vocab)
    store.write_json(f"{folder}/meta.json", meta)
    return store.uri(folder)


def load_cached(store: Store, cfg: SkipThoughtConfig) -> tuple[dict[str, Any], list[str], dict[str, Any]] | None:
    """The cached (state dict, vocabulary, report) for ``cfg``, or None when not trained yet."""
    import torch

    folder = cache_dir(cfg)
    if not store.exists(f"{folder}/meta.json"):
        return None
    state = torch.load(io.BytesIO(store.read_bytes(f"{folder}/encoder.pt")), weights_only=True)
    return state, store.read_json(f"{folder}/vocab.json"), store.read_json(f"{folder}/meta.json")


@register("skipthought")
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
        cfg = self.config or config_for(self._profile or str(ctx.extra.get("profile") or "default"), **self._overrides)
        began = time.perf_counter()
        cached = load_cached(ctx.store, cfg)
        if cached is None:
            corpus = read_corpus(ctx.settings.books_dir, cfg.max_books, cfg.max_sentences)
            corpus_seconds = time.perf_counter() - began
            state, vocab, meta = train(corpus, cfg)
            meta["corpus_seconds"] = round(corpus_seconds, 3)
            meta["cache_uri"] = save_cached(ctx.store, cfg, state, vocab, meta)
        else:
            state, vocab, meta = cached
        _, Encoder, _ = _modules()
        encoder = Encoder(len(vocab), cfg.embed_dim, cfg.hidden_dim)
        encoder.load_state_dict(state)
        load_seconds = time.perf_counter() - began if cached else 0.0
        self._encoder, self.config, self.meta = encoder.eval(), cfg, {**meta, "loaded_from_cache": cached is not None}
        self._index = {word: i for i, word in enumerate(vocab)}
        original = sum(float(meta.get(k, 0.0)) for k in ("corpus_seconds", "prepare_seconds", "train_seconds"))
        self._fit_seconds = original + load_seconds

    def encode(self, texts: Sequence[str], batch_size: int = 1024) -> np.ndarray:
        """``[N, hidden_dim]`` float32 sentence vectors; zero rows for texts with no known word."""
        if self._encoder is None or self.config is None:
            raise ConfigError("skipthought: call fit() before encode()/score()")
        import torch

        unk = self._index[UNK]
        ids = [[self._index.get(t, unk) for t in word_tokens(text)] for text in texts]
        rows = np.array([r for r, row in enumerate(ids) if any(i != unk for i in row)], dtype=np.int64)
        lengths = np.array([len(row) for row in ids], dtype=np.int64)
        flat = np.array([i for row in ids for i in row], dtype=np.int64)
        starts = np.cumsum(lengths) - lengths
        out = np.zeros((len(texts), self.config.hidden_dim), dtype=np.float32)
        with _Threads(torch, self.config.threads), torch.no_grad():
            for lo in range(0, len(rows), batch_size):
                chunk = rows[lo:lo + batch_size]
                padded, lens = _padded(torch, flat, starts, lengths, chunk, int(lengths[chunk].max()))
                out[chunk] = self._encoder(padded, lens).numpy()
        return out

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
