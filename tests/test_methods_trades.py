"""TRADES: the KL term by hand, its inner maximiser, and lambda = 0 as natural training."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from methods_support import CPU, build, digits, same_weights

from tradeoff.methods.trades import kl_adversarial, kl_divergence
from tradeoff.models.small import LinearClassifier


def test_kl_term_by_hand():
    torch.manual_seed(0)
    clean, adv = torch.randn(5, 4), torch.randn(5, 4)
    p, q = clean.softmax(1), adv.softmax(1)
    by_hand = sum(float(p[i, k] * (p[i, k].log() - q[i, k].log())) for i in range(5) for k in range(4))
    assert float(kl_divergence(adv, clean)) == pytest.approx(by_hand, rel=1e-5)
    assert float(kl_divergence(clean, clean)) == pytest.approx(0.0, abs=1e-6)


def test_trades_loss_is_ce_plus_lambda_batchmean_kl():
    x, y = digits(16)
    method = build("trades", lam=6.0, model=lambda: LinearClassifier(10, 1, 8))
    torch.manual_seed(3)
    x_adv = method.adversarial(x, y)
    logits, logits_adv = method.model(x), method.model(x_adv)
    p, log_q = logits.softmax(1), logits_adv.log_softmax(1)
    kl_by_hand = (p * (p.log() - log_q)).sum() / len(x)
    expected = F.cross_entropy(logits, y) + 6.0 * kl_by_hand
    torch.manual_seed(3)
    loss, reported = method.loss(x, y)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert torch.equal(reported, logits)
    # the clean softmax is not detached: the regulariser's gradient reaches the clean pass as well
    grad = torch.autograd.grad(kl_divergence(logits_adv.detach(), logits), logits)[0]
    assert grad.abs().sum() > 0


@pytest.mark.parametrize("norm,eps", [("linf", 0.1), ("l2", 0.5)])
def test_kl_maximiser_stays_in_ball_and_raises_the_kl(norm, eps):
    x, _ = digits(32)
    model = build("trades").model
    torch.manual_seed(0)
    x_adv = kl_adversarial(model, x, eps=eps, norm=norm, steps=5, step_size=eps / 4, runtime=CPU)
    assert model.training and all(p.requires_grad and p.grad is None for p in model.parameters())
    dist = (x_adv - x).flatten(1).abs().amax(1) if norm == "linf" else (x_adv - x).flatten(1).norm(dim=1)
    assert (dist <= eps + 1e-6).all() and x_adv.min() >= 0 and x_adv.max() <= 1
    with torch.no_grad():
        model.eval()
        start = kl_divergence(model((x + 0.001 * torch.randn_like(x)).clamp(0, 1)), model(x))
        assert kl_divergence(model(x_adv), model(x)) > 10 * start


def test_lambda_zero_is_natural_training():
    x, y = digits(32)
    steps = []
    for name, params in (("trades", {"lam": 0.0}), ("nt", {})):
        method = build(name, lr=0.5, momentum=0.9, **params)
        method.set_epoch(0)
        method.train_step(x, y)
        steps.append(method.model)
    assert same_weights(*steps)


def test_inner_attack_uses_the_registry_attack():
    x, y = digits(16)
    method = build("trades", inner="attack", attack_mode="train")
    torch.manual_seed(0)
    x_adv = method.adversarial(x, y)
    torch.manual_seed(0)
    assert torch.equal(x_adv, method.attack.perturb(x, y))
    with pytest.raises(ValueError, match=r"trades\.inner: must be one of \['kl', 'attack'\], got 'pgd'"):
        build("trades", inner="pgd")
