"""PGD is held to its threat model and, on a linear classifier, to the exact worst case."""

import pytest
import torch
from helpers import build_attack as build
from torch import nn

from tradeoff import attacks
from tradeoff.attacks.base import project, random_start


def _mlp(seed=0, d=16, k=3):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, k)).eval()


@pytest.mark.parametrize("norm, eps", [("linf", 0.1), ("l2", 0.5)])
def test_pgd_stays_in_ball_and_box(norm, eps):
    model = _mlp()
    x = torch.rand(64, 1, 4, 4)
    y = torch.randint(0, 3, (64,))
    x_adv = build("pgd", model, eps=eps, norm=norm, steps=7, step_size=eps / 3, seed=1).perturb(x, y)
    delta = (x_adv - x).flatten(1)
    size = delta.abs().amax(1) if norm == "linf" else delta.norm(dim=1)
    assert (size <= eps + 1e-6).all()
    assert x_adv.min() >= 0 and x_adv.max() <= 1


def test_projection_and_random_start():
    d = torch.randn(10, 3, 4, 4) * 5
    assert project(d, 0.1, "linf").abs().max() <= 0.1
    assert (project(d, 0.5, "l2").flatten(1).norm(dim=1) <= 0.5 + 1e-6).all()
    small = torch.full((1, 3, 4, 4), 1e-3)
    assert torch.equal(project(small, 0.5, "l2"), small)
    gen = torch.Generator().manual_seed(0)
    r = random_start(torch.zeros(1000, 8), 0.2, "l2", gen)
    assert (r.norm(dim=1) <= 0.2 + 1e-6).all() and r.norm(dim=1).mean() > 0.15


def test_pgd_reaches_exact_worst_case_of_linear_classifier():
    """CA-AT Appendix B: for binary logistic regression w.x + b under L-inf, the worst case is
    x - y * eps * sign(w) (y in {-1, +1}); PGD must find it and give exactly the robust accuracy."""
    torch.manual_seed(0)
    d, eps = 20, 0.05
    w, b = torch.randn(d), torch.tensor(0.1)
    model = nn.Linear(d, 2)
    with torch.no_grad():  # two-logit form of logistic regression: logit difference = w.x + b
        model.weight.copy_(torch.stack([-w / 2, w / 2]))
        model.bias.copy_(torch.stack([-b / 2, b / 2]))
    x = torch.rand(500, d) * 0.8 + 0.1  # away from the box so the box does not bind
    labels = (x @ w + b > 0).long()
    flip = torch.rand(500) < 0.1       # some examples misclassified clean
    labels[flip] = 1 - labels[flip]
    s = 2 * labels.float() - 1
    worst = x - s[:, None] * eps * w.sign()
    exact_robust = ((worst @ w + b) * s > 0)
    x_adv = build("pgd", model, eps=eps, steps=50, step_size=eps / 10, random_start=True, seed=0).perturb(x, labels)
    pgd_robust = model(x_adv).argmax(1) == labels
    assert torch.equal(pgd_robust, exact_robust)
    clean_correct = model(x).argmax(1) == labels
    assert exact_robust.float().mean() < clean_correct.float().mean()
    hit = ~exact_robust & clean_correct
    assert torch.allclose(x_adv[hit], worst[hit], atol=1e-5)


def test_steps_are_really_steps():
    calls = []

    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 2)

        def forward(self, x):
            calls.append(1)
            return self.lin(x)

    m = Counting()
    build("pgd", m, eps=0.1, steps=13, seed=0).perturb(torch.rand(5, 4), torch.zeros(5, dtype=torch.long))
    assert len(calls) == 13  # one forward per gradient step, nothing else
    calls.clear()
    build("pgd", m, eps=0.1, steps=4, restarts=3, seed=0).perturb(torch.rand(5, 4), torch.zeros(5, dtype=torch.long))
    assert len(calls) == 3 * (4 + 1)  # with restarts, one more forward each to record which examples broke


def test_attack_leaves_no_weight_gradients_and_restores_flags():
    model = _mlp()
    build("pgd", model, eps=0.1, steps=3, seed=0).perturb(torch.rand(8, 1, 4, 4), torch.zeros(8, dtype=torch.long))
    assert all(p.grad is None and p.requires_grad for p in model.parameters())


def test_seeded_attack_is_deterministic():
    model = _mlp()
    x, y = torch.rand(16, 1, 4, 4), torch.randint(0, 3, (16,))
    a = build("pgd", model, eps=0.1, steps=3, seed=5).perturb(x, y)
    b = build("pgd", model, eps=0.1, steps=3, seed=5).perturb(x, y)
    assert torch.equal(a, b)


def test_unknown_attack_and_parameter_are_named():
    with pytest.raises(attacks.AttackError, match="unknown attack 'nope'; allowed"):
        build("nope", _mlp(), eps=0.1)
    with pytest.raises(attacks.AttackError, match=r"pgd\.stepz: unknown parameter of attack 'pgd'; did you mean 'steps'"):
        build("pgd", _mlp(), eps=0.1, stepz=3)
