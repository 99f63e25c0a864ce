"""The paper's optimiser: eq. (6) Nesterov momentum with the mu schedule, per-tower th_G re-normalisation.

Eq. (6): dL_k = mu_{k-1} dL_{k-1} - eps grad L(L_{k-1} + mu_{k-1} dL_{k-1}). The gradient is
taken at the look-ahead point, so the parameters held by the model between steps are
``theta_k = lambda_k + mu_k v_k`` (v = dLambda): one step is then
``v' = mu_k v - eps g(theta_k)``; ``theta' = theta_k - mu_k v + (1 + mu_{k+1}) v'``, which is eq. (6)
exactly, also when mu changes between steps. :meth:`NesterovMomentum.lambda_weights`
swaps in ``lambda_k = theta_k - mu_k v_k`` for validation and for the saved model.
"""
from __future__ import annotations

import math
from contextlib import contextmanager, nullcontext
from typing import Iterable, Iterator

import torch
from torch import nn

from pipeline.core.errors import ConfigError

MU_EDGE, MU_MIDDLE, EDGE_FRACTION = 0.9, 0.995, 0.02


def momentum_at(step: int, total_steps: int) -> float:
    """mu_k: 0.9 during the first and last 2% of all updates, 0.995 in between (0-based step)."""
    edge = math.ceil(EDGE_FRACTION * total_steps)
    return MU_EDGE if step < edge or step >= total_steps - edge else MU_MIDDLE


class NesterovMomentum(torch.optim.Optimizer):
    """Eq. (6) with a fixed step size ``lr`` (epsilon) and the paper's mu schedule over ``total_steps``."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float, total_steps: int) -> None:
        if lr <= 0 or total_steps < 1:
            raise ConfigError(f"Nesterov needs lr > 0 and total_steps >= 1, got lr={lr}, total_steps={total_steps}")
        super().__init__(params, {"lr": lr, "total_steps": total_steps, "step": 0})

    def _velocities(self, group: dict) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        params = [p for p in group["params"]]
        for p in params:
            if "velocity" not in self.state[p]:
                self.state[p]["velocity"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return params, [self.state[p]["velocity"] for p in params]

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        """One update from the gradients at the look-ahead point currently held by the model."""
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            k, total, lr = group["step"], group["total_steps"], group["lr"]
            mu_now, mu_next = momentum_at(k, total), momentum_at(k + 1, total)
            params, velocities = self._velocities(group)
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            torch._foreach_add_(params, velocities, alpha=-mu_now)  # back to lambda_k
            torch._foreach_mul_(velocities, mu_now)
            torch._foreach_add_(velocities, grads, alpha=-lr)  # v_{k+1}
            torch._foreach_add_(params, velocities, alpha=1.0 + mu_next)  # theta_{k+1}
            group["step"] = k + 1
        return loss

    @contextmanager
    def lambda_weights(self) -> Iterator[None]:
        """Inside, the parameters hold lambda_k (the iterate of eq. 6) instead of the look-ahead point."""
        saved = []
        with torch.no_grad():
            for group in self.param_groups:
                mu = momentum_at(group["step"], group["total_steps"])
                for p in group["params"]:
                    velocity = self.state[p].get("velocity")
                    if velocity is not None:
                        saved.append((p, p.detach().clone()))
                        p.sub_(velocity, alpha=mu)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, value in saved:
                    p.copy_(value)


def renormalise_per_tower(towers: dict[str, nn.Module], th_g: float) -> dict[str, torch.Tensor]:
    """Algorithm 1: each tower's gradient scaled to norm th_G when its norm exceeds it; returns the norms.

    The norms stay 0-d tensors on the gradients' device, so a training step never waits for the GPU.
    """
    norms = {}
    for side, tower in towers.items():
        grads = [p for p in tower.parameters() if p.grad is not None]
        norms[side] = torch.nn.utils.clip_grad_norm_(grads, th_g) if grads else torch.zeros(())
    return norms


def build_optimizer(name: str, params: Iterable[torch.Tensor], lr: float, total_steps: int) -> torch.optim.Optimizer:
    """``nesterov`` (the paper's, default) or ``adam``."""
    if name == "nesterov":
        return NesterovMomentum(params, lr=lr, total_steps=total_steps)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    raise ConfigError(f"unknown optimizer {name!r}; choose nesterov or adam")


def evaluation_weights(optimizer: torch.optim.Optimizer):  # type: ignore[no-untyped-def]
    """Context in which the model holds the weights to evaluate and save (lambda_k for Nesterov)."""
    return optimizer.lambda_weights() if isinstance(optimizer, NesterovMomentum) else nullcontext()
