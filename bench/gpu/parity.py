"""Summary of a GPU session's training runs (bench/gpu/session.sh): CUDA beside CPU for every tower.

For each tower: examples/s of the one epoch on each device, the epoch's train and validation loss on
each, and how far the CUDA loss curve (``step_losses``, one mean eq. (5) loss per update) is from the
CPU's: the largest relative difference and the first update where it passes 1e-3. Then the trainer's
throughput at a batch that fills the GPU and the embedding job's titles/s.

    python3 -m bench.gpu.parity DIR [OUT.json]   (DIR holds train-<model>-<device>.json, as deepsent --json
                                                  writes them; OUT.json gets the table's figures)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def curve_gap(cuda: list[float], cpu: list[float], tolerance: float = 1e-3) -> tuple[float, int | None]:
    """Largest relative difference of two loss curves, and the first update (1-based) beyond ``tolerance``."""
    gaps = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(cuda, cpu)]
    beyond = next((i + 1 for i, g in enumerate(gaps) if g > tolerance), None)
    return (max(gaps) if gaps else float("nan")), beyond


def main(folder: Path, out: Path | None = None) -> None:
    """Print the parity and throughput table of the runs in ``folder`` (and write its figures to ``out``)."""
    figures: dict[str, Any] = {"benchmark": "gpu_parity", "towers": {}, "trainer_lstm_batch_4096": {}, "embed_job": {}}
    print(f"{'tower':<8} {'cuda ex/s':>10} {'cpu ex/s':>9} {'train loss cuda/cpu':>22} {'valid loss cuda/cpu':>22} "
          f"{'max rel gap':>12} {'first >1e-3':>11} {'updates':>7}")
    for model in ("lstm", "rnn", "bilstm", "dssm", "clsm"):
        cuda, cpu = _load(folder / f"train-{model}-cuda.json"), _load(folder / f"train-{model}-cpu.json")
        if not cuda or not cpu or "history" not in cuda or "history" not in cpu:
            print(f"{model:<8} missing")
            continue
        a, b = cuda["history"][0], cpu["history"][0]
        gap, first = curve_gap(a["step_losses"], b["step_losses"])
        print(f"{model:<8} {a['examples_per_s']:>10,.0f} {b['examples_per_s']:>9,.0f} "
              f"{a['train_loss']:>10.5f}/{b['train_loss']:<11.5f} {a['valid_loss']:>10.5f}/{b['valid_loss']:<11.5f} "
              f"{gap:>12.2e} {str(first):>11} {len(a['step_losses']):>7}")
        figures["towers"][model] = {
            "devices": {"cuda": cuda["device"], "cpu": cpu["device"]},
            "examples_per_s": {"cuda": a["examples_per_s"], "cpu": b["examples_per_s"]},
            "train_loss": {"cuda": a["train_loss"], "cpu": b["train_loss"]},
            "valid_loss": {"cuda": a["valid_loss"], "cpu": b["valid_loss"]},
            "max_relative_gap": gap, "first_update_beyond_1e-3": first, "updates": len(a["step_losses"])}
    for precision in ("fp32", "bf16"):
        run = _load(folder / f"train-lstm-cuda-4096-{precision}.json")
        if run and "history" in run:
            rates = ", ".join(f"{h['examples_per_s']:,.0f}" for h in run["history"])
            losses = ", ".join(f"{h['valid_loss']:.4f}" for h in run["history"])
            print(f"trainer, LSTM batch 4096 {precision}: examples/s per epoch {rates}; valid loss {losses}")
            figures["trainer_lstm_batch_4096"][precision] = {
                "examples_per_s": [h["examples_per_s"] for h in run["history"]],
                "valid_loss": [h["valid_loss"] for h in run["history"]]}
    for device in ("cuda", "cpu"):
        run = _load(folder / f"embed-lstm-{device}.json")
        if run and "titles_per_s" in run:
            print(f"embed job on {device}: {run['titles']:,} titles at {run['titles_per_s']:,.0f} titles/s")
            figures["embed_job"][device] = {"titles": run["titles"], "titles_per_s": run["titles_per_s"]}
    if out is not None:
        out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
