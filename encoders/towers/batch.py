"""Batches of sentences as the towers consume them: words as bags of letter-trigram ids.

A sentence is a sequence of words; a word is a bag of trigram ids with counts. A batch
flattens every word of every sentence into one EmbeddingBag input (``ids``, ``weights``,
``offsets``) and keeps ``lengths`` (words per sentence), so recurrent towers can rebuild
the ``[B, T, d]`` word sequence and DSSM can sum over the whole sentence.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

#: One sentence: per word, its trigram ids and the matching counts.
Sentence = tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]]


@dataclass
class SentenceBatch:
    """``num_sentences`` sentences, every word an EmbeddingBag bag.

    Attributes:
        ids: ``[E]`` int64, trigram ids of every word, word after word.
        weights: ``[E]`` float32, count of each id within its word.
        offsets: ``[W]`` int64, start of each word in ``ids`` (EmbeddingBag offsets).
        lengths: ``[B]`` int64, number of words of each sentence (every sentence has >= 1).
    """

    ids: torch.Tensor
    weights: torch.Tensor
    offsets: torch.Tensor
    lengths: torch.Tensor

    @property
    def num_sentences(self) -> int:
        """B, the number of sentences."""
        return int(self.lengths.shape[0])

    @property
    def max_len(self) -> int:
        """T, the number of words of the longest sentence."""
        return int(self.lengths.max().item()) if self.num_sentences else 0

    def to(self, device: torch.device | str) -> "SentenceBatch":
        """The same batch on ``device``."""
        return SentenceBatch(*(t.to(device, non_blocking=True) for t in (self.ids, self.weights, self.offsets, self.lengths)))

    def pin_memory(self) -> "SentenceBatch":
        """The same batch in page-locked host memory (DataLoader's ``pin_memory`` calls this), so copies to
        the GPU can be asynchronous."""
        return SentenceBatch(*(t.pin_memory() for t in (self.ids, self.weights, self.offsets, self.lengths)))

    def word_positions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(sentence index, word position) of every word, for scattering into ``[B, T, d]``."""
        lengths = self.lengths
        row = torch.repeat_interleave(torch.arange(lengths.shape[0], device=lengths.device), lengths)
        starts = torch.cumsum(lengths, 0) - lengths
        pos = torch.arange(row.shape[0], device=lengths.device) - starts[row]
        return row, pos

    @classmethod
    def from_sentences(cls, sentences: Sequence[Sentence]) -> "SentenceBatch":
        """Build a batch from python lists (ids per word, counts per word) of each sentence."""
        ids: list[int] = []
        weights: list[int] = []
        offsets: list[int] = []
        lengths: list[int] = []
        for word_ids, word_counts in sentences:
            if len(word_ids) == 0:
                raise ValueError("a sentence must have at least one word")
            lengths.append(len(word_ids))
            for wi, wc in zip(word_ids, word_counts):
                if len(wi) == 0 or len(wi) != len(wc):
                    raise ValueError("every word needs >= 1 trigram id and one count per id")
                offsets.append(len(ids))
                ids.extend(wi)
                weights.extend(wc)
        return cls(
            ids=torch.tensor(ids, dtype=torch.int64),
            weights=torch.tensor(weights, dtype=torch.float32),
            offsets=torch.tensor(offsets, dtype=torch.int64),
            lengths=torch.tensor(lengths, dtype=torch.int64),
        )


@dataclass
class TextBatch:
    """Sentences as text, for towers that tokenise them themselves (a pretrained transformer); ``tokens``: the word
    pieces every sentence is padded to (masked out: a fixed shape), 0 for as many as the longest has."""

    texts: list[str]
    tokens: int = 0

    @property
    def num_sentences(self) -> int:
        """B, the number of sentences."""
        return len(self.texts)

    def to(self, device: torch.device | str) -> "TextBatch":
        """Itself: the tower moves its token ids to its device after tokenising."""
        return self

    def pin_memory(self) -> "TextBatch":
        """Itself (text has no tensor to pin)."""
        return self


@dataclass
class MixedBatch:
    """Sentences both as text and word-hashed, for a tower that joins a transformer and a trigram tower."""

    text: TextBatch
    trigrams: SentenceBatch

    @property
    def num_sentences(self) -> int:
        """B, the number of sentences."""
        return self.text.num_sentences

    def to(self, device: torch.device | str) -> "MixedBatch":
        """The same batch with its trigram tensors on ``device``."""
        return MixedBatch(self.text, self.trigrams.to(device))

    def pin_memory(self) -> "MixedBatch":
        """The same batch with its trigram tensors in page-locked host memory."""
        return MixedBatch(self.text, self.trigrams.pin_memory())


@dataclass
class PairBatch:
    """B training examples: a query, its clicked title and ``num_negatives`` random titles.

    ``docs`` holds ``B * (1 + num_negatives)`` sentences, example-major: for example 0 its
    clicked title then its negatives, then example 1, and so on.
    """

    query: SentenceBatch | TextBatch
    docs: SentenceBatch | TextBatch
    num_negatives: int

    @property
    def size(self) -> int:
        """B, the number of examples."""
        return self.query.num_sentences

    def to(self, device: torch.device | str) -> "PairBatch":
        """The same batch on ``device``."""
        return PairBatch(self.query.to(device), self.docs.to(device), self.num_negatives)

    def pin_memory(self) -> "PairBatch":
        """The same batch in page-locked host memory."""
        return PairBatch(self.query.pin_memory(), self.docs.pin_memory(), self.num_negatives)
