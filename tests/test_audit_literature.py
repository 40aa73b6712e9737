"""The literature's remaining checks (issue 37, point 5), each against a known answer, a model where it must fire and
one where it must not: FGSM stronger than PGD (Carlini et al. 2019's checklist), random sampling in the ball finding
examples PGD missed (Athalye et al. 2018), a decision-based attack (RayS, Chen & Gu 2020), silent success counted per
example (Pintor et al. 2022). Tiny models on generated data (tests/test_audit.py's)."""

from __future__ import annotations

import pytest
import torch
from test_audit import EPS, FAST, PGD, Net, Wrapped, _auditor, _checks, _data, _train

from tradeoff.attacks import from_spec
from tradeoff.core.spec import AttackSpec


@pytest.fixture(scope="module")
def test_set():
    return _data(300, seed=2)


@pytest.fixture(scope="module")
def plain():
    return _train(Net())


def _on_grid(test_set):
    """The test images on the 1/255 grid of 8-bit images."""
    x, y = test_set
    return torch.round(x * 255) / 255, y


def test_fgsm_stronger_than_pgd_fails(plain, test_set):
    """A model whose gradient is right on 8-bit images (the clean test points) and negated off them: FGSM, one step
    from the clean point, follows the right gradient; PGD, from a random start off the grid, is led downhill."""
    def front(z):
        on = ((z * 255 - torch.round(z * 255)).abs() < 1e-3).flatten(1).all(1).view(-1, 1, 1, 1)
        return torch.where(on, z, 2 * z.detach() - z)

    grid = _on_grid(test_set)
    checks = _checks(_auditor(Wrapped(plain, front), grid), "gradients", "fgsm")
    assert checks["gradients"]["verdict"] == "pass"  # the clean points' gradients are fine
    fgsm = checks["fgsm"]
    assert fgsm["verdict"] == "fail" and fgsm["numbers"]["accuracy"] < fgsm["numbers"]["pgd"] - 0.2 and fgsm["next"]
    assert _checks(_auditor(plain, grid), "fgsm")["fgsm"]["verdict"] == "pass"


class OnePixel(torch.nn.Module):
    """Two classes told apart by pixel 0 alone, behind a step (``pixel 0 > 1/2``): a zero gradient everywhere, and a
    decision that noise in the ball flips half the time."""

    def forward(self, x):
        p = (x.flatten(1)[:, :1] > 0.5).float()
        return torch.cat([1 - p, p], 1) * 10 + 0 * x.flatten(1).sum(1, keepdim=True)


def _one_pixel_data(n=200):
    gen = torch.Generator().manual_seed(5)
    y = torch.randint(0, 2, (n,), generator=gen)
    x = torch.rand(n, 1, 8, 8, generator=gen) * 0.6 + 0.2
    x.view(n, -1)[:, 0] = 0.5 + 0.1 * (2 * y.float() - 1)  # 0.1 from the step: inside the 0.25 ball
    return x, y


def test_random_sampling_in_the_ball_finds_what_the_gradient_attacks_missed(plain, test_set):
    """Behind a step the gradient attacks stay where their one random start put them; sixteen random points of the
    ball break nearly every example. A plain model: random points find nothing the gradient attacks missed."""
    random = _checks(_auditor(OnePixel(), _one_pixel_data()), "steps", "random")["random"]
    assert random["verdict"] == "fail" and random["numbers"]["only_breaks"] > 0.02 * 200 and random["next"]
    assert random["numbers"]["accuracy"] < random["numbers"]["white_box"]
    assert _checks(_auditor(plain, test_set), "steps", "random")["random"]["verdict"] == "pass"


def test_a_decision_based_attack_breaks_what_the_gradients_cannot(plain, test_set):
    """RayS (the model's decisions only) against the step model (zero gradients): it breaks what every white-box
    attack leaves; on a plain model it finds nothing they missed."""
    decision = _checks(_auditor(OnePixel(), _one_pixel_data()), "steps", "decision")["decision"]
    assert decision["verdict"] == "fail" and decision["numbers"]["accuracy"] == 0.0 < decision["numbers"]["white_box"]
    assert _checks(_auditor(plain, test_set), "steps", "decision")["decision"]["verdict"] == "pass"


def test_rays_keeps_to_the_budget_and_breaks_a_plain_model_as_pgd_does(plain, test_set):
    """RayS's points lie in the L-inf ball and [0, 1]; on a plain model it breaks nearly what PGD breaks, from the
    model's decisions alone."""
    x, y = test_set
    x, y = x[:100], y[:100]
    rays = from_spec(AttackSpec.from_dict({"type": "rays", "norm": "linf", "eps": EPS, "queries": 400}), plain)
    adv = rays.perturb(x, y)
    assert float((adv - x).abs().max()) <= EPS + 1e-6 and float(adv.min()) >= 0 and float(adv.max()) <= 1
    pgd = from_spec(AttackSpec.from_dict(PGD), plain, seed=0).perturb(x, y)
    with torch.no_grad():
        by_rays, by_pgd = (plain(adv).argmax(1) != y).sum(), (plain(pgd).argmax(1) != y).sum()
    assert by_rays >= 0.7 * by_pgd > 0


def test_silent_success_is_counted_per_example(plain, test_set):
    """x + 0.2 sin(30 x), sign-PGD with a step of the whole budget: it passes through adversarial points and leaves
    them. Each such example is counted, and any one warns even where the aggregate gap is within a (large) tolerance;
    a plain model has none."""
    wavy = Wrapped(plain, lambda x: x + 0.2 * torch.sin(30 * x))
    loose = FAST.replace(tolerance=0.5)
    silent = _checks(_auditor(wavy, test_set, attack={**PGD, "step_size": EPS}, settings=loose), "silent")["silent"]
    assert silent["verdict"] == "warn" and silent["numbers"]["silent"] == len(silent["numbers"]["silent_examples"]) > 0
    assert silent["numbers"]["gap"] <= 0.5
    plain_silent = _checks(_auditor(plain, test_set, settings=loose), "silent")["silent"]
    assert plain_silent["verdict"] == "pass" and plain_silent["numbers"]["silent"] == 0
