"""Pictures of section V-A: gate heatmaps (Figs. 4-6) and LSTM-vs-RNN cost curves (Fig. 7).

Figures are built on ``matplotlib.figure.Figure`` (the Agg canvas, no pyplot state), so they
are safe in worker processes and give the same PNG bytes for the same numbers.
"""
from __future__ import annotations

import io
from typing import Any, Sequence

import numpy as np

from encoders.analysis.traces import GATES, Detection, Trace
from pipeline.core.config import Settings
from pipeline.core.errors import DeepsentError

#: The per-epoch training cost logged by encoders/training/trainer.py (mean of eq. (5) over the epoch).
TRAIN_LOSS_KEY = "train_loss"
#: Sentences longer than this are drawn as two rows of panels (keeps the picture readable).
WIDE_SENTENCE = 9
_LABELS = {"i": "input gate i(t)", "c": "cell state c(t)", "o": "output gate o(t)", "y": "output y(t)"}


def figure_png(fig: Any) -> bytes:
    """PNG bytes of a figure (no software/date metadata, so equal figures give equal bytes)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def heatmap_figure(trace: Trace, detection: Detection | None = None, direction: str = "forward") -> Any:
    """i, c, o, y as cells x words heatmaps on ONE colour scale; with ``detection``, a Fig. 6 panel.

    The Fig. 6 panel shows y(t) of the detection's most active cells on the same scale, a dot
    on every (cell, word) the cell detects. Only the sentence's real words are drawn.
    """
    from matplotlib.figure import Figure

    gates = trace.forward if direction == "forward" else trace.backward
    panels = [(f"({'abcd'[k]}) {_LABELS[g]}", gates[g].T) for k, g in enumerate(g for g in GATES if g in gates)]
    if detection is not None:
        panels.append((f"y(t), {len(detection.cells)} most active cells", gates["y"][:, detection.cells].T))
    vmin = float(min(v.min() for _, v in panels))
    vmax = max(float(max(v.max() for _, v in panels)), vmin + 1e-6)
    words = len(trace.words)
    columns = len(panels) if words <= WIDE_SENTENCE else 3  # long titles: two rows of panels
    rows = -(-len(panels) // columns)
    width, height = max(1.6, 0.24 * words + 0.7), max(3.2, 0.045 * trace.ncell + 2.0)
    fig = Figure(figsize=(width * columns + 1.2, height * rows), dpi=90, layout="constrained")
    grid = fig.subplots(rows, columns, squeeze=False).ravel()
    for spare in grid[len(panels):]:
        spare.set_visible(False)
    axes = grid[: len(panels)]
    for ax, (title, data) in zip(axes, panels):
        image = ax.imshow(data, aspect="auto", interpolation="nearest", cmap="viridis", vmin=vmin, vmax=vmax)
        ax.set_xticks(range(words), labels=list(trace.words), rotation=60, ha="right", fontsize=8)
        ax.set_yticks([])
        ax.set_title(title, fontsize=9)
    ticks = np.unique(np.linspace(0, trace.ncell - 1, min(trace.ncell, 8)).round().astype(int))
    for ax in axes[:: columns]:
        ax.set_yticks(ticks, labels=[str(t + 1) for t in ticks], fontsize=7)
        ax.set_ylabel("cell")
    if detection is not None:
        axes[-1].set_yticks(range(len(detection.cells)), labels=[str(c + 1) for c in detection.cells], fontsize=7)
        axes[-1].set_ylabel("cell")
        hit_cells, hit_words = np.nonzero(detection.detected.T)
        axes[-1].scatter(hit_words, hit_cells, s=14, c="black", marker="o")
    reading = "left to right" if direction == "forward" else f"right to left ({trace.backward_source})"
    fig.suptitle(f"{trace.side}: \"{' '.join(trace.words)}\" - {reading}", fontsize=10)
    fig.colorbar(image, ax=list(axes), shrink=0.85, label="activation (one scale for all panels)")
    return fig


def gate_heatmaps(trace: Trace, detection: Detection | None = None, direction: str = "forward") -> bytes:
    """PNG of :func:`heatmap_figure`."""
    return figure_png(heatmap_figure(trace, detection, direction))


def cost_history(run_id: str, settings: Settings, key: str = TRAIN_LOSS_KEY) -> tuple[str, list[tuple[int, float]]]:
    """A run's display label and its (epoch, training cost) points from the MLflow metric history."""
    import mlflow
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    mlflow.set_tracking_uri(settings.mlflow_tracking_uri)
    client = MlflowClient()
    try:
        run = client.get_run(run_id)
        history = client.get_metric_history(run_id, key)
    except MlflowException as exc:
        raise DeepsentError(f"run {run_id} not found in {settings.mlflow_tracking_uri}: {exc}") from None
    if not history:
        raise DeepsentError(f"run {run_id} has no {key!r} history to plot (was it trained by deepsent train?)")
    params = run.data.params
    model = run.data.tags.get("deepsent.model") or params.get("model", "model")
    size = next((f"{k}={params[f'tower.{k}']}" for k in ("ncell", "nhid") if f"tower.{k}" in params), "")
    label = f"{model.upper()} ({size})" if size else model.upper()
    points = sorted({m.step: m.value for m in history}.items())
    return f"{label}, run {run_id[:8]}", [(step + 1, value) for step, value in points]


def cost_curve_figure(curves: Sequence[tuple[str, list[tuple[int, float]]]]) -> Any:
    """Loss per epoch of several curves (runs, or one run's training and validation loss) on one log-scale plot (Fig. 7)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2), dpi=90)
    ax = fig.subplots()
    for (label, points), marker in zip(curves, "osd^v<>"):
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=marker, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("cost L(Lambda), eq. (4), per query, log scale")
    ax.set_title("Training cost per epoch (paper Fig. 7)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def cost_curves(run_ids: Sequence[str], settings: Settings) -> bytes:
    """PNG of the training cost per epoch of ``run_ids`` (e.g. LSTM and RNN) from MLflow history."""
    if not run_ids:
        raise DeepsentError("cost_curves needs at least one run id")
    return figure_png(cost_curve_figure([cost_history(r, settings) for r in run_ids]))
