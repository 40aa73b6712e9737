"""CA-AT's projection and vanilla AT's weighting: the update directions, exactly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from methods_support import build, digits, same_weights

from tradeoff.methods.caat import project_gradient
from tradeoff.methods.vanilla import gradient_conflict


def _cos(a, b):
    return float(torch.dot(a, b) / (a.norm() * b.norm()))


def _pair(phi: float, n: int = 50, seed: int = 0):
    """g_c and g_a with cos(g_a, g_c) = phi and different norms (float64)."""
    gen = torch.Generator().manual_seed(seed)
    u, v = torch.randn(n, generator=gen, dtype=torch.float64), torch.randn(n, generator=gen, dtype=torch.float64)
    u = u / u.norm()
    v = v - torch.dot(v, u) * u
    v = v / v.norm()
    return 3.0 * (phi * u + (1 - phi**2) ** 0.5 * v), 0.5 * u  # g_adv, g_clean


@pytest.mark.parametrize("gamma", [0.0, 0.7, 0.8, 0.9, 0.99])
@pytest.mark.parametrize("phi", [-0.9, -0.2, 0.3, 0.69])
def test_projection_lands_on_the_cone(phi, gamma):
    g_adv, g_clean = _pair(phi)
    if phi >= gamma:
        return
    g = project_gradient(g_adv, g_clean, gamma)
    assert _cos(g, g_clean) == pytest.approx(gamma, abs=1e-9)
    # it is g_a plus a multiple of g_c: its component orthogonal to g_c is g_a's
    u = g_clean / g_clean.norm()
    assert torch.allclose(g - torch.dot(g, u) * u, g_adv - torch.dot(g_adv, u) * u, atol=1e-12)


@pytest.mark.parametrize("phi,gamma", [(0.95, 0.9), (0.8, 0.8), (0.5, 0.3), (0.3, -1.0)])
def test_no_conflict_steps_along_the_clean_gradient(phi, gamma):
    g_adv, g_clean = _pair(phi)
    assert torch.equal(project_gradient(g_adv, g_clean, gamma), g_clean)


def test_gamma_one_is_the_clean_gradient_and_zero_gradients_give_no_nan():
    g_adv, g_clean = _pair(0.5)
    assert torch.equal(project_gradient(g_adv, g_clean, 1.0), g_clean)
    zero = torch.zeros_like(g_clean)
    for a, c in ((g_adv, zero), (zero, g_clean), (zero, zero)):
        out = project_gradient(a, c, 0.8)
        assert torch.isfinite(out).all()


def test_conflict_metric():
    g_adv, g_clean = _pair(0.3)
    m = gradient_conflict(g_adv, g_clean)
    assert float(m["cos"]) == pytest.approx(0.3)
    assert float(m["mu"]) == pytest.approx(3.0 * 0.5 * (1 - 0.3))
    assert (float(m["norm_ga"]), float(m["norm_gc"])) == (pytest.approx(3.0), pytest.approx(0.5))


def _grads(model, loss):
    params = [p for p in model.parameters()]
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])


@pytest.mark.parametrize("per_tensor", [False, True])
def test_caat_step_follows_the_projected_gradient(per_tensor):
    x, y = digits(32)
    method = build("caat", gamma=0.95, per_tensor=per_tensor, lr=0.5)
    before = [p.detach().clone() for p in method.model.parameters()]
    # the same adversarial batch the step will make: same model, same RNG state
    torch.manual_seed(1)
    x_adv = method.adversarial(x, y)
    g_clean = _grads(method.model, F.cross_entropy(method.model(x), y))
    g_adv = _grads(method.model, F.cross_entropy(method.model(x_adv), y))
    if per_tensor:
        sizes = [p.numel() for p in method.model.parameters()]
        expected = torch.cat([project_gradient(a, c, 0.95) for a, c in zip(g_adv.split(sizes), g_clean.split(sizes))])
    else:
        expected = project_gradient(g_adv, g_clean, 0.95)
        assert _cos(expected, g_clean) == pytest.approx(0.95, abs=1e-4) or _cos(g_adv, g_clean) >= 0.95
    torch.manual_seed(1)
    out = method.train_step(x, y)
    step = torch.cat([(b - p.detach()).reshape(-1) for b, p in zip(before, method.model.parameters())])
    assert torch.allclose(step, 0.5 * expected, rtol=1e-4, atol=1e-7)
    assert float(out["cos"]) == pytest.approx(_cos(g_adv, g_clean), abs=1e-5)
    assert float(out["mu"]) == pytest.approx(float(g_clean.norm() * g_adv.norm()) * (1 - _cos(g_adv, g_clean)), rel=1e-4)


def _one_step(name, x, y, **params):
    method = build(name, lr=0.5, momentum=0.9, weight_decay=5e-4, **params)
    torch.manual_seed(1)
    method.set_epoch(0)
    method.train_step(x, y)
    return method.model


@pytest.mark.parametrize("adv_loss", ["ce", "trades", "clp"])
def test_vanilla_lambda_0_is_exactly_the_natural_step(adv_loss):
    x, y = digits(32)
    assert same_weights(_one_step("vanilla", x, y, lam=0.0, adv_loss=adv_loss), _one_step("nt", x, y))


def test_vanilla_lambda_1_is_exactly_the_pgd_at_step():
    x, y = digits(32)
    assert same_weights(_one_step("vanilla", x, y, lam=1.0), _one_step("pgd_at", x, y, beta=1.0))
    assert same_weights(_one_step("vanilla", x, y, lam=0.3), _one_step("pgd_at", x, y, beta=0.3))


def test_caat_gamma_one_is_natural_training():
    x, y = digits(32)
    assert same_weights(_one_step("caat", x, y, gamma=1.0), _one_step("nt", x, y))


def test_vanilla_with_conflict_tracking_takes_the_same_step():
    x, y = digits(32)
    tracked = _one_step("vanilla", x, y, lam=0.5, track_conflict=True)
    plain = _one_step("vanilla", x, y, lam=0.5)
    for a, b in zip(tracked.parameters(), plain.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
