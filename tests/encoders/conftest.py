"""Fixtures of the encoder tests: random word-hashed sentences, a tiny real feature set, MLflow."""
from __future__ import annotations

import random
from typing import Callable

import pytest
import torch

from encoders.towers.batch import PairBatch, Sentence, SentenceBatch

torch.set_num_threads(1)


def random_sentence(rng: random.Random, vocab_size: int, words: int) -> Sentence:
    """A sentence of ``words`` words, each 1-6 distinct trigram ids with counts 1-2."""
    ids = [rng.sample(range(vocab_size), rng.randint(1, 6)) for _ in range(words)]
    return ids, [[rng.randint(1, 2) for _ in w] for w in ids]


@pytest.fixture()
def make_sentences() -> Callable[..., list[Sentence]]:
    """``make_sentences(n, vocab_size, max_words, seed)`` -> n random sentences of 1..max_words words."""

    def make(n: int, vocab_size: int = 50, max_words: int = 7, seed: int = 0) -> list[Sentence]:
        rng = random.Random(seed)
        return [random_sentence(rng, vocab_size, rng.randint(1, max_words)) for _ in range(n)]

    return make


@pytest.fixture()
def make_pairs(make_sentences: Callable[..., list[Sentence]]) -> Callable[..., PairBatch]:
    """``make_pairs(b, negatives, vocab_size, seed)`` -> a PairBatch of random queries and titles."""

    def make(b: int, negatives: int = 4, vocab_size: int = 50, seed: int = 0) -> PairBatch:
        queries = SentenceBatch.from_sentences(make_sentences(b, vocab_size, 4, seed))
        docs = SentenceBatch.from_sentences(make_sentences(b * (1 + negatives), vocab_size, 9, seed + 1))
        return PairBatch(queries, docs, negatives)

    return make
