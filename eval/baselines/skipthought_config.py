"""The skip-thought baseline's sizes and budget (:class:`SkipThoughtConfig`, named :data:`PROFILES`) and its vocabulary.

Shared by the baseline (:mod:`eval.baselines.skipthought`) and its network
(:mod:`eval.baselines.skipthought_net`), which is imported only when the baseline is fitted.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import asdict, dataclass, replace
from typing import Any

from eval.baselines.books import BookCorpus
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIALS = (PAD, EOS, UNK)


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
