"""The skip-thought network and its training loop (torch), imported only when the baseline is fitted.

See :mod:`eval.baselines.skipthought` for the model's description, sizes and the cache. Here: a
GRU sentence encoder, the two conditional GRU decoders with a shared adaptive softmax, training
on the books' sentence triples, and encoding of padded id batches.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, Iterator

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from eval.baselines.books import BookCorpus
from eval.baselines.skipthought_config import EOS, SPECIALS, UNK, SkipThoughtConfig, build_vocab

log = logging.getLogger("eval.baselines.skipthought")


class GRUSentenceEncoder(nn.Module):
    """Word embeddings + GRU; the sentence vector is the state after the last word."""

    def __init__(self, n_words: int, embed_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(n_words, embed_dim, padding_idx=0)
        self.gru = nn.GRU(embed_dim, hidden_dim, batch_first=True)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``[B, hidden_dim]`` sentence vectors of zero-padded ``ids`` with their ``lengths``."""
        packed = pack_padded_sequence(self.embed(ids), lengths, batch_first=True, enforce_sorted=False)
        return self.gru(packed)[1][-1]


class SkipThoughtNet(nn.Module):
    """Encoder, previous/next-sentence decoders and their shared adaptive softmax."""

    def __init__(self, n_words: int, cfg: SkipThoughtConfig) -> None:
        super().__init__()
        self.encoder = GRUSentenceEncoder(n_words, cfg.embed_dim, cfg.hidden_dim)
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
        """Loss of reconstructing the previous and the next sentence from the centre one."""
        prev_ids, prev_len, ids, lengths, next_ids, next_len = batch
        thought = self.encoder(ids, lengths)
        return self.decode_loss(0, thought, prev_ids, prev_len) + self.decode_loss(1, thought, next_ids, next_len)


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch uses ``n`` CPU threads inside, the previous number after."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def padded(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, rows: np.ndarray, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sentences ``rows`` of the flat id array as a zero-padded ``[B, T]`` tensor and their lengths."""
    lens = np.minimum(lengths[rows], max_len)
    cols = np.arange(int(lens.max()))
    mask = cols[None, :] < lens[:, None]
    ids = np.where(mask, flat[np.where(mask, starts[rows, None] + cols[None, :], 0)], 0)
    return torch.from_numpy(ids), torch.from_numpy(lens)


def train(corpus: BookCorpus, cfg: SkipThoughtConfig) -> tuple[dict[str, np.ndarray], list[str], dict[str, Any]]:
    """Train on the corpus triples; returns the encoder's weights (numpy), the vocabulary and a report."""
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
    with torch_threads(cfg.threads):
        torch.manual_seed(cfg.seed)
        model = SkipThoughtNet(len(vocab), cfg)
        optimiser = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
        began = time.perf_counter()
        while not cfg.max_steps or len(losses) < cfg.max_steps:
            if losses and time.perf_counter() - began > 60.0 * cfg.max_minutes:
                capped = True
                break
            if cursor + batch_size > len(order):
                order, cursor, epochs = rng.permutation(corpus.centres), 0, epochs + 1
            centres, cursor = order[cursor:cursor + batch_size], cursor + batch_size
            batch = tuple(t for shift in (-1, 0, 1) for t in padded(flat, starts, lengths, centres + shift, cfg.max_len))
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
    weights = {k: v.detach().numpy().copy() for k, v in model.encoder.state_dict().items()}
    return weights, vocab, meta


def encoder_from_weights(weights: dict[str, np.ndarray], n_words: int, cfg: SkipThoughtConfig) -> GRUSentenceEncoder:
    """The trained encoder rebuilt from its weights, in eval mode."""
    encoder = GRUSentenceEncoder(n_words, cfg.embed_dim, cfg.hidden_dim)
    encoder.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()})
    return encoder.eval()


def encode(encoder: GRUSentenceEncoder, ids: list[list[int]], unk: int, hidden_dim: int, threads: int,
           batch_size: int = 1024) -> np.ndarray:
    """``[N, hidden_dim]`` float32 vectors of id sequences; zero rows for sequences of ``unk`` only."""
    rows = np.array([r for r, row in enumerate(ids) if any(i != unk for i in row)], dtype=np.int64)
    lengths = np.array([len(row) for row in ids], dtype=np.int64)
    flat = np.array([i for row in ids for i in row], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    out = np.zeros((len(ids), hidden_dim), dtype=np.float32)
    with torch_threads(threads), torch.no_grad():
        for lo in range(0, len(rows), batch_size):
            chunk = rows[lo:lo + batch_size]
            batch, lens = padded(flat, starts, lengths, chunk, int(lengths[chunk].max()))
            out[chunk] = encoder(batch, lens).numpy()
    return out
