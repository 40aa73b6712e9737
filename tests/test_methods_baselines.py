"""FAT's early stopping, IAT's mixup, RST's objective and unlabeled data, CLP's pairing term."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from methods_support import CPU, build, digits

from tradeoff.attacks.base import project
from tradeoff.methods.clp import softmax_distance
from tradeoff.methods.fat import early_stopped_pgd
from tradeoff.methods.iat import mixup
from tradeoff.models.small import LinearClassifier


def _linear_model_and_batch(n=48):
    torch.manual_seed(0)
    model = LinearClassifier(10, 1, 8)
    x, _ = digits(n)
    with torch.no_grad():
        y = model(x).argmax(1)  # every example starts correctly classified
    return model, x, y


@pytest.mark.parametrize("tau", [0, 1, 2])
def test_fat_stops_tau_steps_after_first_misclassification(tau):
    model, x, y = _linear_model_and_batch()
    eps, step, steps = 0.1, 0.015, 10
    # the full PGD trajectory of every example, one example at a time
    trajectory = [x.clone()]
    for _ in range(steps):
        xa = trajectory[-1].clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(F.cross_entropy(model(xa), y, reduction="sum"), xa)
        trajectory.append((x + project(xa.detach() + step * grad.sign() - x, eps, "linf")).clamp(0, 1))
    with torch.no_grad():
        wrong = torch.stack([model(t).argmax(1) != y for t in trajectory[:steps]])  # checked before each step
    x_adv, taken = early_stopped_pgd(model, x, y, eps=eps, norm="linf", steps=steps, step_size=step, tau=tau,
                                     runtime=CPU, omega=0.0)
    stopped_early = 0
    for i in range(len(x)):
        budget, stop = tau, steps
        for k in range(steps):
            if wrong[k, i]:
                if budget == 0:
                    stop = k
                    break
                budget -= 1
        assert int(taken[i]) == stop, i
        assert torch.allclose(x_adv[i], trajectory[stop][i], atol=1e-6), i
        first = int(wrong[:, i].float().argmax()) if wrong[:, i].any() else None
        if first is not None and wrong[first:first + tau + 1, i].all() and first + tau < steps:
            assert stop == first + tau  # still misclassified: exactly tau more steps
            stopped_early += 1
    assert stopped_early > len(x) // 4 and (taken == steps).any()


def test_fat_tau_schedule_and_start():
    method = build("fat", tau_epochs=[5, 9])
    # the 1-based epoch t: tau 0 for t <= 5, 1 for 5 < t <= 9, then 2 (FAT's code: epoch <= 50, <= 90)
    for epoch, tau in ((0, 0), (4.9, 0), (5, 0), (5.1, 1), (6, 1), (9, 1), (10, 2), (100, 2)):
        method.set_epoch(epoch)
        assert method.tau == tau
    model, x, y = _linear_model_and_batch(8)
    torch.manual_seed(0)
    start, taken = early_stopped_pgd(model, x, y, eps=0.3, norm="linf", steps=0, step_size=0.1, tau=0,
                                     runtime=CPU, omega=0.001)
    torch.manual_seed(0)
    assert torch.equal(start, (x + 0.001 * torch.randn_like(x)).clamp(0, 1)) and (taken == 0).all()


def test_mixup_is_a_convex_combination():
    x, y = digits(32)
    torch.manual_seed(0)
    lams = []
    for _ in range(20):
        x_mix, y_a, y_b, lam = mixup(x, y, 1.0)
        lams.append(lam)
        assert 0 <= lam <= 1 and torch.equal(y_a, y)
        # x_mix[i] = lam x[i] + (1 - lam) x[j] with y_b[i] = y[j] for one permutation j
        index = torch.tensor([int(((x - (x_mix[i] - lam * x[i]) / (1 - lam)).flatten(1).abs().amax(1)).argmin())
                              for i in range(len(x))])
        assert sorted(index.tolist()) == list(range(len(x)))
        assert torch.allclose(x_mix, lam * x + (1 - lam) * x[index], atol=1e-6) and torch.equal(y_b, y[index])
    assert min(lams) < 0.25 and max(lams) > 0.75  # Beta(1, 1) is uniform


def test_iat_loss_is_half_clean_mixup_plus_half_adversarial_mixup():
    x, y = digits(16)
    method = build("iat")
    torch.manual_seed(2)
    x_adv = method.adversarial(x, y)
    parts = []
    for batch in (x, x_adv):
        x_mix, y_a, y_b, lam = mixup(batch, y, 1.0)
        logits = method.model(x_mix)
        parts.append(lam * F.cross_entropy(logits, y_a) + (1 - lam) * F.cross_entropy(logits, y_b))
    torch.manual_seed(2)
    loss, _ = method.loss(x, y)
    assert loss.item() == pytest.approx((0.5 * (parts[0] + parts[1])).item(), rel=1e-6)


def test_rst_objective_and_unlabeled_data(tmp_path):
    x, y = digits(16)
    method = build("rst")
    assert method.p.beta == 0.5 and method.p.attack_mode == "eval"
    before = copy.deepcopy(method.model.state_dict())  # train-mode passes move BatchNorm's running statistics
    torch.manual_seed(1)
    method.model.eval()  # RST's attack runs in eval mode (Raghunathan et al.'s code)
    x_adv = method.attack.perturb(x, y)
    method.model.train()
    expected = 0.5 * F.cross_entropy(method.model(x), y) + 0.5 * F.cross_entropy(method.model(x_adv), y)
    method.model.load_state_dict(before)
    torch.manual_seed(1)
    assert method.loss(x, y)[0].item() == pytest.approx(expected.item(), rel=1e-6)

    missing = tmp_path / "pseudo.pt"
    with pytest.raises(FileNotFoundError, match="pseudo.pt.*never downloaded"):
        build("rst", unlabeled=str(missing))
    x_u, _ = digits(40)
    torch.save({"x": x_u[20:], "y": torch.arange(20) % 10}, missing)
    with_unlabeled = build("rst", unlabeled=str(missing))
    loss, logits = with_unlabeled.loss(x, y)
    assert logits.shape == (16, 10) and torch.isfinite(loss)
    torch.save({"x": x_u[20:] * 2, "y": torch.arange(20)}, missing)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        build("rst", unlabeled=str(missing))


def test_clp_loss_by_hand():
    x, y = digits(16)
    method = build("clp", lam=0.7)
    torch.manual_seed(4)
    x_adv = method.attack.perturb(x, y)
    logits, logits_adv = method.model(x), method.model(x_adv)
    pairing = sum((logits_adv[i].softmax(0) - logits[i].softmax(0)).pow(2).sum().sqrt() for i in range(16)) / 16
    assert softmax_distance(logits_adv, logits).item() == pytest.approx(pairing.item(), rel=1e-6)
    expected = F.cross_entropy(logits, y) + F.cross_entropy(logits_adv, y) + 0.7 * pairing
    torch.manual_seed(4)
    assert method.loss(x, y)[0].item() == pytest.approx(expected.item(), rel=1e-6)
