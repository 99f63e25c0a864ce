"""PLSA (Hofmann 1999) fitted by EM with MAP smoothing on the document side, scipy.sparse vectorised.

Model: P(w|d) = sum_z P(w|z) P(z|d). Priors: symmetric Dirichlet(1 + word_prior) on each
P(.|z) and Dirichlet(1 + topic_prior) on each P(.|d), so the M-step adds those pseudo-counts.
The E-step posterior P(z|d,w) is never materialised: with s_dw = sum_z P(z|d) P(w|z) at the
non-zeros and R = n_dw / s_dw, the expected counts are P(w|z) * (Theta^T R) and
P(z|d) * (R Phi^T), each one sparse-dense product. Judged titles are folded in (EM on
P(z|d) with P(w|z) fixed); a query scores log P(q|d) over its words known to the model
(unknown words add the same constant to every title of a query, so they are left out).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from encoders.search.vectors import unique_index
from eval.baseline_catalog import BaselineSpec
from eval.baselines.base import FitContext
from eval.baselines.fit_cache import FitCache, text_digest
from eval.baselines.ulm import Vocabulary
from pipeline.core import validators as v
from pipeline.core.defaults import SEED

log = logging.getLogger(__name__)
CHUNK = 1 << 16  # non-zeros per block when evaluating s_dw (bounds memory at T = 500)


@dataclass
class PlsaFit:
    """Fitted P(w|z) (topics x words), P(z|d) of the training documents, MAP objective per iteration."""

    phi: np.ndarray
    theta: np.ndarray
    objective: list[float] = field(default_factory=list)


def _dot_at(rows: np.ndarray, cols: np.ndarray, theta: np.ndarray, phi_t: np.ndarray) -> np.ndarray:
    """sum_z theta[rows[i], z] phi_t[cols[i], z] for every i, in blocks of CHUNK."""
    out = np.empty(cols.shape[0], dtype=theta.dtype)
    for lo in range(0, cols.shape[0], CHUNK):
        hi = lo + CHUNK
        out[lo:hi] = np.einsum("ij,ij->i", theta[rows[lo:hi]], phi_t[cols[lo:hi]])
    return out


def _mixture_at(counts: sp.csr_matrix, theta: np.ndarray, phi_t: np.ndarray) -> np.ndarray:
    """s_dw = sum_z theta[d, z] phi[z, w] at every non-zero (d, w) of ``counts``."""
    rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    return _dot_at(rows, counts.indices, theta, phi_t)


def _normalise(m: np.ndarray) -> np.ndarray:
    return m / m.sum(axis=1, keepdims=True)


def map_objective(counts: sp.csr_matrix, theta: np.ndarray, phi: np.ndarray, word_prior: float, topic_prior: float) -> float:
    """log-likelihood sum n_dw log P(w|d) plus the log Dirichlet priors (up to a constant)."""
    s = _mixture_at(counts, theta, np.ascontiguousarray(phi.T))
    return float(counts.data @ np.log(s, dtype=np.float64) + _log_prior(theta, phi, word_prior, topic_prior))


def _log_prior(theta: np.ndarray, phi: np.ndarray, word_prior: float, topic_prior: float) -> float:
    words = word_prior * np.log(phi, dtype=np.float64).sum() if word_prior else 0.0
    topics = topic_prior * np.log(theta, dtype=np.float64).sum() if topic_prior else 0.0
    return float(words + topics)


def _em_step(counts: sp.csr_matrix, theta: np.ndarray, phi: np.ndarray, word_prior: float, topic_prior: float, update_phi: bool) -> tuple[np.ndarray, np.ndarray, float]:
    s = _mixture_at(counts, theta, np.ascontiguousarray(phi.T))
    loglik = float(counts.data @ np.log(s, dtype=np.float64))
    ratio = counts.copy()
    ratio.data = (counts.data / s).astype(theta.dtype)
    new_theta = _normalise(theta * (ratio @ phi.T) + topic_prior)
    new_phi = _normalise(phi * (ratio.T @ theta).T + word_prior) if update_phi else phi
    return new_theta, new_phi, loglik


def fit_plsa(
    counts: sp.csr_matrix,
    topics: int,
    iterations: int = 100,
    word_prior: float = 0.01,
    topic_prior: float = 0.1,
    tol: float = 1e-5,
    seed: int = SEED,
    dtype: str = "float32",
) -> PlsaFit:
    """MAP-EM on a (documents x words) count matrix; stops after ``iterations`` or a relative gain < ``tol``."""
    rng = np.random.default_rng(seed)
    counts = sp.csr_matrix(counts, dtype=dtype)
    theta = rng.dirichlet(np.ones(topics), size=counts.shape[0]).astype(dtype)
    phi = rng.dirichlet(np.ones(counts.shape[1]), size=topics).astype(dtype)
    objective: list[float] = []
    for it in range(iterations):
        prior = _log_prior(theta, phi, word_prior, topic_prior)
        new_theta, new_phi, loglik = _em_step(counts, theta, phi, word_prior, topic_prior, update_phi=True)
        objective.append(loglik + prior)
        theta, phi = new_theta, new_phi
        if it and abs(objective[-1] - objective[-2]) < tol * abs(objective[-2]):
            break
    objective.append(map_objective(counts, theta, phi, word_prior, topic_prior))
    return PlsaFit(phi=phi, theta=theta, objective=objective)


def fold_in(counts: sp.csr_matrix, phi: np.ndarray, iterations: int = 50, topic_prior: float = 0.1) -> np.ndarray:
    """P(z|d) of new documents by EM with P(w|z) fixed (uniform start, deterministic)."""
    counts = sp.csr_matrix(counts, dtype=phi.dtype)
    theta = np.full((counts.shape[0], phi.shape[0]), 1.0 / phi.shape[0], dtype=phi.dtype)
    for _ in range(iterations):
        theta, _, _ = _em_step(counts, theta, phi, 0.0, topic_prior, update_phi=False)
    return theta


SPEC = BaselineSpec(name="plsa", label="PLSA", cls="PLSAScorer", order=3,
                    profiles={"quick": "topics=100", "full": "topics=500"})


class PLSAScorer:
    """PLSA with T topics on the distinct training titles; query likelihood under the title's topics."""

    name = "plsa"
    OPTIONS = {"topics": v.positive_int, "iterations": v.positive_int, "word_prior": v.non_negative_float,
               "topic_prior": v.non_negative_float, "tol": v.non_negative_float, "fold_in_iterations": v.positive_int}

    def __init__(
        self,
        topics: int = 100,
        iterations: int = 100,
        word_prior: float = 0.01,
        topic_prior: float = 0.1,
        tol: float = 1e-5,
        fold_in_iterations: int = 50,
    ) -> None:
        self.topics, self.iterations, self.tol = int(topics), int(iterations), float(tol)
        self.word_prior, self.topic_prior = float(word_prior), float(topic_prior)
        self.fold_in_iterations = int(fold_in_iterations)
        self._vocab: Vocabulary | None = None
        self._phi = np.zeros((0, 0))
        self.objective: list[float] = []
        self._fit_seconds = 0.0
        self.cached = False

    def fit(self, ctx: FitContext) -> None:
        """Fit on the distinct training titles, or load the same fit from the store cache."""
        docs = list(dict.fromkeys(t for t in ctx.train_titles if t.split()))
        self._vocab = Vocabulary.from_texts(docs)
        settings = {k: getattr(self, k) for k in ("topics", "iterations", "word_prior", "topic_prior", "tol")}
        cache = FitCache(ctx.store, "plsa", {"docs": text_digest(docs), "seed": ctx.seed, **settings, "version": 1})
        hit = cache.load()
        if hit is not None:
            arrays, meta = hit
            self._phi, self.objective = arrays["phi"], list(arrays["objective"])
            self._fit_seconds, self.cached = float(meta["fit_seconds"]), True
            return
        start = time.perf_counter()
        counts = self._vocab.counts(docs, unknown=False)
        result = fit_plsa(counts, self.topics, self.iterations, self.word_prior, self.topic_prior, self.tol, ctx.seed)
        self._fit_seconds = time.perf_counter() - start
        self._phi, self.objective, self.cached = result.phi, result.objective, False
        log.info("PLSA T=%d: %d docs, %d words, %d EM iterations in %.1f s", self.topics, len(docs), self._vocab.size, len(self.objective) - 1, self._fit_seconds)
        cache.save({"phi": self._phi, "objective": np.asarray(self.objective)}, {"fit_seconds": self._fit_seconds, **settings})

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """sum over known query words of log sum_z P(w|z) P(z|title), titles folded in."""
        if self._vocab is None:
            raise RuntimeError("PLSAScorer.score() called before fit()")
        ut, ti = unique_index(titles)
        theta = fold_in(self._vocab.counts(ut, unknown=False), self._phi, self.fold_in_iterations, self.topic_prior)
        q = self._vocab.counts(list(queries), unknown=False).tocoo()
        p_word = _dot_at(ti[q.row], q.col, theta, np.ascontiguousarray(self._phi.T))
        return np.bincount(q.row, weights=q.data * np.log(p_word, dtype=np.float64), minlength=len(queries))

    def describe(self) -> dict[str, Any]:
        """Row details: T, priors, EM iterations, P(w|z) parameter count, original fit time."""
        iters = max(len(self.objective) - 1, 0)
        return {
            "settings": f"T={self.topics}, MAP priors {self.word_prior:g}/{self.topic_prior:g}, {iters} EM iterations",
            "params": int(self._phi.size),
            "fit_seconds": self._fit_seconds,
            "cached": self.cached,
        }
