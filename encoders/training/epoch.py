"""One epoch of Algorithm 1 on one rank: the eq. (5)/(6) update step, the training pass, validation."""
from __future__ import annotations

import sys
import time
from typing import Any

import torch

from encoders.model.device import autocast
from encoders.towers.twotower import click_loss, ranking_stats
from encoders.training.data import batches_for
from encoders.training.distributed import all_sum
from encoders.training.optim import renormalise_per_tower

# ``training`` below is the trainer's per-rank state (encoders.training.trainer._Training): train_data,
# valid_data, net, model, optimizer, config, ctx, device.


def update_step(net: torch.nn.Module, towers: dict[str, torch.nn.Module], optimizer: torch.optim.Optimizer,
                batch: Any, gamma: float, th_g: float, loss_scale: float,
                precision: str = "fp32") -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One update of Algorithm 1: summed eq. (5) loss, backward of ``loss * loss_scale``, each tower
    re-normalised to ``th_g``, the eq. (6) step. Returns the summed loss and the towers' gradient norms
    as tensors on the batch's device (reading them waits for the GPU; the caller decides when)."""
    with autocast(next(net.parameters()).device, precision):
        scores = net(batch)
    batch_loss = click_loss(scores.float(), gamma, reduction="sum")
    optimizer.zero_grad(set_to_none=True)
    (batch_loss * loss_scale).backward()
    norms = renormalise_per_tower(towers, th_g)
    optimizer.step()
    return batch_loss, norms


def train_epoch(training: Any, epoch: int) -> dict[str, Any]:
    """One pass of ``training`` over its training shards: eq. (5) loss, per-tower re-normalisation, eq. (6) step.

    Losses and gradient norms add up on the device and are read once, at the end of the epoch, so
    the host never waits for a GPU between steps. ``step_losses`` is the epoch's loss curve (the
    mean eq. (5) loss of each update on this rank).
    """
    from tqdm import tqdm

    training.train_data.set_epoch(epoch)
    training.net.train()
    shown = training.ctx.is_main and sys.stderr.isatty()
    bar = tqdm(total=len(training.train_data), desc=f"epoch {epoch + 1}/{training.config.epochs}", unit="batch",
               file=sys.stderr, disable=not shown, leave=False)
    zero = torch.zeros((), device=training.device)
    loss_sum, clipped, norm_sums = zero.clone(), zero.clone(), {"query": zero.clone(), "doc": zero.clone()}
    step_losses: list[torch.Tensor] = []
    count, steps, start = 0, 0, time.perf_counter()
    for batch in batches_for(training.train_data, training.device):
        batch = batch.to(training.device)
        global_size = all_sum([batch.size], training.ctx, training.device)[0]
        batch_loss, norms = update_step(training.net, training.model.towers(), training.optimizer, batch,
                                        training.config.gamma, training.config.th_G,
                                        training.ctx.world / global_size,  # DDP averages: global mean
                                        training.config.precision)
        loss_sum += batch_loss.detach()
        step_losses.append(batch_loss.detach() / batch.size)
        count, steps = count + batch.size, steps + 1
        for side, value in norms.items():
            norm_sums[side] += value
            clipped += value > training.config.th_G
        bar.update()
        if shown and steps % 20 == 0:  # reading the loss waits for the device: only for a person watching
            bar.set_postfix(loss=f"{float(loss_sum) / count:.4f}",
                            ex_s=f"{count * training.ctx.world / (time.perf_counter() - start):.0f}")
    bar.close()
    curve = torch.stack(step_losses).tolist()  # the one wait for the device in an epoch
    seconds = time.perf_counter() - start
    total_loss, count = all_sum([float(loss_sum), count], training.ctx, training.device)
    return {"epoch": epoch, "train_loss": total_loss / count, "examples_per_s": count / seconds,
            "train_seconds": seconds, "grad_norm_query": float(norm_sums["query"]) / steps,
            "grad_norm_doc": float(norm_sums["doc"]) / steps, "clipped_share": float(clipped) / (2 * steps),
            "step_losses": curve}


@torch.no_grad()
def validate(training: Any) -> dict[str, float]:
    """Loss, hit@1 and MRR of the clicked title among its negatives on ``training``'s validation pairs."""
    training.model.eval()
    sums = [0.0, 0.0, 0.0, 0.0]
    for batch in batches_for(training.valid_data, training.device):
        scores = training.model(batch.to(training.device))
        stats = ranking_stats(scores)
        sums = [a + b for a, b in zip(sums, (float(click_loss(scores, training.config.gamma, "sum")),
                                              batch.size, stats["hits"], stats["rr"]))]
    loss, count, hits, rr = all_sum(sums, training.ctx, training.device)
    return {"valid_loss": loss / count, "valid_acc": hits / count, "valid_mrr": rr / count}
