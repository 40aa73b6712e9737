"""Friendly Adversarial Training (FAT, Zhang et al., 2020): CE on early-stopped PGD examples.

Early-stopped PGD-K-tau (FAT's Algorithm 1), with the model in eval mode: start at x + omega N(0, 1), then K
times: every example still searching is checked first; one that is misclassified stops there if its budget
tau is used up, and otherwise spends one unit of it; then every example still searching takes a PGD step on
the cross-entropy (sign / normalised gradient, projected onto the eps-ball and [0, 1]). So an example that
stays misclassified stops tau steps after it was first misclassified; one never misclassified takes all K
steps. tau is a step function of the (1-based) epoch t: ``tau_values[i]`` once t passes ``tau_epochs[i-1]`` (FAT's
code: tau 0 for epochs 1-50, 1 for 51-90, then 2; the breakpoints are epoch-valued, so smaller scales rescale them).

Budget, norm, K and step size come from the run's training-attack spec. The authors' code starts uniformly in
the eps-ball and adds omega N(0, 1) after every step: ``random_start: uniform`` and ``step_noise: true``.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from tradeoff.attacks.base import frozen, project, random_start, steepest_step
from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.params import FLAG, INTEGER, LIST, NUMBER, TEXT, Param, Params
from tradeoff.core.passes import TRAIN1, G
from tradeoff.core.ranges import at_least, count
from tradeoff.methods.base import SingleLearner, register
from tradeoff.methods.common import TRAINING_ATTACK, attack_budget, check_pgd_budget, own_steps

if TYPE_CHECKING:
    from torch import nn

    from tradeoff.core.runtime import Runtime

torch = LazyModule("torch")
F = LazyModule("torch.nn.functional")


def early_stopped_pgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float, norm: str, steps: int,
                      step_size: float, tau: int, runtime: Runtime, omega: float = 0.001, start: str = "normal",
                      step_noise: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """FAT's early-stopped PGD (module docstring). Returns the adversarial batch and the number of PGD steps
    each example took. Leaves the model in train mode."""
    model.eval()
    if start == "normal":
        x_adv = (x + omega * torch.randn_like(x)).clamp(0, 1)
    else:
        x_adv = (x + random_start(x, eps, norm, None)).clamp(0, 1)
    budget = torch.full((len(x),), int(tau), device=x.device)
    searching = torch.ones(len(x), dtype=torch.bool, device=x.device)
    taken = torch.zeros(len(x), dtype=torch.long, device=x.device)
    with frozen(model):
        for _ in range(int(steps)):
            idx = searching.nonzero().squeeze(1)
            xa = x_adv[idx].requires_grad_(True)
            with runtime.autocast():
                logits = model(xa)
            wrong = logits.argmax(1) != y[idx]
            stop = wrong & (budget[idx] == 0)
            budget[idx[wrong & ~stop]] -= 1
            (grad,) = torch.autograd.grad(F.cross_entropy(logits.float(), y[idx]), xa)
            keep = ~stop
            searching[idx[stop]] = False
            if not keep.any():
                break
            idx, xa, grad = idx[keep], xa[keep].detach(), grad[keep]
            with torch.no_grad():
                step = xa + step_size * steepest_step(grad, norm)
                if step_noise:
                    step = step + omega * torch.randn_like(step)
                x_adv[idx] = (x[idx] + project(step - x[idx], eps, norm)).clamp(0, 1)
            taken[idx] += 1
    model.train()
    return x_adv.detach(), taken


@register
class FAT(SingleLearner):
    name = "fat"
    parameters = Params(
        TRAINING_ATTACK,
        Param("tau_values", LIST, [0, 1, 2], item=INTEGER, range=count(0), nonempty=True,
              meaning="the early-stopping budget tau, one more entry than tau_epochs"),
        Param("tau_epochs", LIST, [50, 90], item=NUMBER, range=at_least(0), epochs=True,
              meaning="the epochs after which tau takes its next value"),
        Param("omega", NUMBER, 0.001, range=at_least(0), meaning="the start's noise"),
        Param("random_start", TEXT, "normal", choices=("normal", "uniform"), meaning="where the search starts"),
        Param("step_noise", FLAG, False, meaning="omega N(0, 1) added after every step (the authors' code)"))

    @classmethod
    def check_params(cls, spec):
        method = {**cls.parameters.defaults(), **spec["method"]}
        check_pgd_budget(cls.name, method["attack"])
        values, bounds = method["tau_values"], method["tau_epochs"]
        if len(values) != len(bounds) + 1 or any(b <= a for a, b in zip(bounds, bounds[1:])):
            raise ValueError(f"fat: tau_values needs one more entry than the increasing tau_epochs, got "
                             f"{values} and {bounds}")

    @classmethod
    def passes(cls, p, classes):
        """Every step of its PGD (early stopping only shortens it: an upper bound), then the adversarial pass."""
        return own_steps(p.attack) * G + TRAIN1

    def __init__(self, spec, build_model, runtime):
        super().__init__(spec, build_model, runtime)
        self.tau = int(self.p.tau_values[0])

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        # epoch is the 1-based epoch (or the time at a step's end): tau_values[i] for tau_epochs[i-1] < t <= tau_epochs[i]
        self.tau = int(self.p.tau_values[bisect.bisect_left(self.p.tau_epochs, epoch)])

    def loss(self, x, y):
        eps, norm, steps, step_size = attack_budget(self.p.attack, self.budget_scale)
        x_adv, self.steps_taken = early_stopped_pgd(
            self.model, x, y, eps=eps, norm=norm, steps=steps, step_size=step_size, tau=self.tau, runtime=self.runtime,
            omega=float(self.p.omega), start=self.p.random_start, step_noise=bool(self.p.step_noise))
        with self.runtime.autocast():
            logits = self.model(x_adv)
        return F.cross_entropy(logits.float(), y), logits

    def train_step(self, x, y):
        out = super().train_step(x, y)
        # FAT's "BP count": the mean number of PGD steps per example
        return {**out, "tau": torch.tensor(float(self.tau)), "pgd_steps": self.steps_taken.float().mean()}
