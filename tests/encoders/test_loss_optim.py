"""Eq. (5) loss by hand, eq. (6) Nesterov with the mu schedule, per-tower th_G, overfitting per tower."""
from __future__ import annotations

import math
from typing import Callable

import pytest
import torch

from encoders.towers.batch import PairBatch
from encoders.towers.tower_catalog import tower_names
from encoders.towers.twotower import TwoTowerModel, click_loss, ranking_stats
from encoders.training.optim import NesterovMomentum, build_optimizer, evaluation_weights, momentum_at, renormalise_per_tower


def test_loss_is_eq5() -> None:
    torch.manual_seed(0)
    scores = torch.rand(6, 5) * 2 - 1  # cosines in [-1, 1]
    gamma = 10.0
    by_hand = []
    for row in scores.tolist():
        deltas = [row[0] - neg for neg in row[1:]]
        by_hand.append(math.log(1 + sum(math.exp(-gamma * d) for d in deltas)))
        softmax_form = -math.log(math.exp(gamma * row[0]) / sum(math.exp(gamma * r) for r in row))
        assert abs(softmax_form - by_hand[-1]) < 1e-9
    assert click_loss(scores, gamma).item() == pytest.approx(sum(by_hand) / 6, rel=1e-6)
    assert click_loss(scores, gamma, "sum").item() == pytest.approx(sum(by_hand), rel=1e-6)


def test_ranking_stats_count_ties_against_the_click() -> None:
    scores = torch.tensor([[0.9, 0.1, 0.2], [0.1, 0.5, 0.1], [0.3, 0.3, 0.0]])
    assert ranking_stats(scores) == {"hits": 1.0, "rr": pytest.approx(1 + 1 / 3 + 1 / 2)}


def test_mu_schedule_first_and_last_two_percent() -> None:
    mus = [momentum_at(k, 100) for k in range(100)]
    assert mus[:2] == [0.9, 0.9] and mus[-2:] == [0.9, 0.9]
    assert set(mus[2:98]) == {0.995}
    mus = [momentum_at(k, 1000) for k in range(1000)]
    assert mus.count(0.9) == 40 and mus[19] == 0.9 and mus[20] == 0.995 and mus[980] == 0.9


def test_nesterov_is_eq6_with_the_schedule() -> None:
    """Our look-ahead form against eq. (6) transcribed: dL_k = mu dL_{k-1} - eps grad(L_{k-1} + mu dL_{k-1})."""
    torch.manual_seed(1)
    target, scale = torch.randn(5), torch.rand(5) + 0.5

    def grad(x: torch.Tensor) -> torch.Tensor:  # gradient of sum(scale * (x - target)^2) / 2
        return scale * (x - target)

    steps, eps = 60, 0.3
    lam, delta = torch.zeros(5), torch.zeros(5)
    param = torch.nn.Parameter(torch.zeros(5))
    opt = NesterovMomentum([param], lr=eps, total_steps=steps)
    for k in range(steps):
        mu = momentum_at(k, steps)
        delta = mu * delta - eps * grad(lam + mu * delta)
        lam = lam + delta
        param.grad = grad(param.detach())  # the model holds the look-ahead point
        opt.step()
        with opt.lambda_weights():
            torch.testing.assert_close(param.detach(), lam, rtol=1e-5, atol=1e-6)
    assert momentum_at(0, steps) != momentum_at(steps // 2, steps)  # the schedule did change


def test_each_tower_is_renormalised_separately() -> None:
    model = TwoTowerModel("dssm", 20, {"nhid": 8, "nout": 4})
    for p in model.query_tower.parameters():
        p.grad = torch.full_like(p, 3.0)
    for p in model.doc_tower.parameters():
        p.grad = torch.full_like(p, 1e-4)
    doc_before = [p.grad.clone() for p in model.doc_tower.parameters()]
    norms = renormalise_per_tower(model.towers(), th_g=1.5)
    assert norms["query"] > 1.5 > norms["doc"]
    query_norm = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in model.query_tower.parameters()]))
    assert query_norm.item() == pytest.approx(1.5, rel=1e-5)
    for before, p in zip(doc_before, model.doc_tower.parameters()):
        assert torch.equal(before, p.grad)


@pytest.mark.parametrize("model_type", tower_names("trigrams"))
def test_every_tower_overfits_a_tiny_set(model_type: str, make_pairs: Callable[..., PairBatch]) -> None:
    torch.manual_seed(0)
    batch = make_pairs(24, negatives=4, vocab_size=60, seed=3)
    small = {"lstm": {"ncell": 16}, "bilstm": {"ncell": 8}, "rnn": {"nhid": 16}, "dssm": {"nhid": 32, "nout": 16},
             "clsm": {"nhid": 32, "nout": 16}}[model_type]
    model = TwoTowerModel(model_type, 60, small)
    opt = build_optimizer("nesterov", model.parameters(), lr=0.1, total_steps=150)
    losses = []
    for _ in range(150):
        loss = click_loss(model(batch), gamma=10.0)
        opt.zero_grad()
        loss.backward()
        renormalise_per_tower(model.towers(), th_g=5.0)
        opt.step()
        losses.append(loss.item())
    with torch.no_grad(), evaluation_weights(opt):
        final = click_loss(model(batch), gamma=10.0).item()
        hits = ranking_stats(model(batch))["hits"]
    assert final < 0.1 * losses[0], (losses[0], final)
    assert hits == 24


def test_adam_is_an_option_not_the_default() -> None:
    from encoders.training.trainer import TrainConfig
    from pipeline.core.errors import ConfigError

    params = [torch.nn.Parameter(torch.zeros(3))]
    assert TrainConfig().resolved().optimizer == "nesterov"  # the paper's, for every trigram tower
    assert isinstance(build_optimizer("adam", params, lr=0.01, total_steps=10), torch.optim.Adam)
    assert isinstance(build_optimizer("nesterov", params, lr=0.01, total_steps=10), NesterovMomentum)
    with pytest.raises(ConfigError, match="unknown optimizer 'sgd'"):
        build_optimizer("sgd", params, lr=0.01, total_steps=10)
