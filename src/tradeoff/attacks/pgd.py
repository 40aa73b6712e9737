"""Projected gradient attacks (Madry et al.), L-inf and L2, and the attacks that are PGD with other settings:
FGSM, MIM (MI-FGSM), CW-inf, PGD-DLR and targeted PGD.

Threat model (every attack here): ||x_adv - x|| <= eps in the attack's norm, x_adv in [0, 1]; white box
(input gradients of the model, whose weights are frozen). ``steps`` is exactly the number of gradient steps
taken per restart (per target class for targeted PGD). With ``restarts`` > 1 an example counts as broken if
any restart breaks it (the first successful perturbation is kept; for unbroken examples the last restart's
is returned).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from tradeoff.attacks.base import Attack, AttackError, project, random_start, register, steepest_step, still_right
from tradeoff.attacks.declared import pgd as declared
from tradeoff.attacks.declared.base import STARTS

Objective = Callable[[torch.Tensor], torch.Tensor]  # logits -> per-example loss to maximise


def margin_loss(logits: torch.Tensor, y: torch.Tensor, kappa: float = float("inf")) -> torch.Tensor:
    """The CW margin loss per example, max_{j != y} z_j - z_y, clipped at kappa (TRADES/FAT form: -kappa floor
    on the negated objective, i.e. the attack stops pushing once the margin exceeds kappa)."""
    true = logits.gather(1, y[:, None]).squeeze(1)
    true_class = torch.zeros_like(logits, dtype=torch.bool).scatter_(1, y[:, None], True)  # (one_hot reads y's
    other = logits.masked_fill(true_class, float("-inf")).amax(1)                            # range on the CPU)
    return (other - true).clamp(max=kappa)


def dlr_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Croce & Hein's difference-of-logits-ratio loss per example (untargeted)."""
    if logits.shape[1] < 3:
        raise AttackError(f"the DLR loss needs at least 3 classes, the model has {logits.shape[1]}")
    sorted_logits, _ = logits.sort(dim=1)
    true = logits.gather(1, y[:, None]).squeeze(1)
    top_is_true = sorted_logits[:, -1] == true
    other = torch.where(top_is_true, sorted_logits[:, -2], sorted_logits[:, -1])
    return -(true - other) / (sorted_logits[:, -1] - sorted_logits[:, -3] + 1e-12)


def targeted_dlr_loss(logits: torch.Tensor, y: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Croce & Hein's targeted DLR loss (APGD-T): -(z_y - z_t) / (z_pi1 - (z_pi3 + z_pi4) / 2)."""
    if logits.shape[1] < 4:
        raise AttackError(f"the targeted DLR loss needs at least 4 classes, the model has {logits.shape[1]}")
    sorted_logits, _ = logits.sort(dim=1)
    true = logits.gather(1, y[:, None]).squeeze(1)
    tgt = logits.gather(1, target[:, None]).squeeze(1)
    return -(true - tgt) / (sorted_logits[:, -1] - 0.5 * (sorted_logits[:, -3] + sorted_logits[:, -4]) + 1e-12)


LOSSES = {
    "ce": lambda logits, y, kappa: F.cross_entropy(logits, y, reduction="none"),
    "cw": lambda logits, y, kappa: margin_loss(logits, y, kappa),
    "dlr": lambda logits, y, kappa: dlr_loss(logits, y),
}

# Targeted losses to maximise: they grow as the target class t overtakes the true class y.
TARGETED_LOSSES = {
    "ce": lambda logits, y, t, kappa: -F.cross_entropy(logits, t, reduction="none"),
    "cw": lambda logits, y, t, kappa: (-margin_loss(logits, t, float("inf"))).clamp(max=kappa),
    "dlr": lambda logits, y, t, kappa: targeted_dlr_loss(logits, y, t),
}


@register
class PGD(declared.PGD, Attack):
    """PGD-k: k steps of size ``step_size`` along the steepest ascent direction of ``loss`` (ce, cw, dlr),
    projected onto the eps-ball and [0, 1], from a random start (``random_start``) of the kind ``start`` names
    (STARTS: ``uniform`` in the eps-ball, ``uniform_radius`` as torchattacks' PGDL2, ``normal`` as TRADES' and
    RST's x + 0.001 N(0, 1)), clipped to [0, 1] unless ``clip_start: false`` (the Generalist code's CW: its first
    gradient is then taken outside the image range; every later point is in [0, 1]). ``momentum`` > 0 gives
    MI-FGSM's accumulated gradient, each gradient divided by its mean absolute value (momentum 1.0 is MIM).
    Gradient normalisations (that mean, the L2 norm of a step, the L2 projection) floor their divisor at 1e-12,
    so a zero gradient gives a zero step (torchattacks adds 1e-10 to PGD-L2's norm and divides MIM's by the bare
    mean, NaN for a zero gradient)."""

    def default_step(self) -> float:
        return self.step_for(self.eps, int(self.steps))

    def step(self) -> float:
        return self.default_step() if self.step_size is None else float(self.step_size)

    def objective(self, y: torch.Tensor) -> Objective:
        if self.loss not in LOSSES:
            raise AttackError(f"{self.name}: unknown loss {self.loss!r}; allowed: {sorted(LOSSES)}")
        loss_fn, kappa = LOSSES[self.loss], float(self.kappa)
        return lambda logits: loss_fn(logits, y, kappa)

    def _perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        gen = self.generator(x.device)
        objective = self.objective(y)
        if self.best_iterate:
            self.labels = y
        if int(self.restarts) == 1:  # nothing to choose between: skip the forward that checks success
            return self._one_run(x, objective, gen)
        best = x.clone()
        broken = torch.zeros(len(x), dtype=torch.bool, device=x.device)
        for _ in range(int(self.restarts)):
            x_adv = self._one_run(x, objective, gen)
            fooled = ~still_right(self.model, x, x_adv, y, self.eps, self.norm)[0]  # an invalid example breaks nothing
            # an example keeps the first perturbation that broke it; the others take the newest one (a select, not a
            # boolean mask, whose indexing would make the host wait for the device)
            best = torch.where(broken.view(-1, *([1] * (x.dim() - 1))), best, x_adv)
            broken |= fooled
        return best

    def start_point(self, x: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
        """The perturbation the steps start from: zero, or a random start (``start``), clipped so that x + delta
        is in [0, 1] unless ``clip_start`` is false."""
        if not self.random_start:
            return torch.zeros_like(x)
        if self.start not in STARTS:
            raise AttackError(f"{self.name}: unknown start {self.start!r}; allowed: {list(STARTS)}")
        delta = random_start(x, self.eps, self.norm, gen, self.start)
        return (x + delta).clamp(0, 1) - x if self.clip_start else delta

    #: options of the Python API (the audit's), not of the config: ``best_iterate`` returns, per example, the first
    #: iterate the model misclassifies (Pintor et al. 2022: an attack that passed through an adversarial point and
    #: left it, a "silent success", still counts), where the default returns the last iterate; ``labels`` (the true
    #: classes) must be set for it. ``keep_trace`` keeps every step's per-example loss in ``loss_trace`` (steps x
    #: examples, of the last run). Neither changes the steps taken.
    best_iterate: bool = False
    keep_trace: bool = False
    labels: torch.Tensor | None = None

    def _one_run(self, x: torch.Tensor, objective: Objective, gen: torch.Generator | None) -> torch.Tensor:
        step = self.step()
        delta = self.start_point(x, gen)
        velocity = torch.zeros_like(x)
        watch = self.best_iterate and self.labels is not None and len(self.labels) == len(x)
        found = torch.zeros(len(x), dtype=torch.bool, device=x.device) if watch else None
        kept = x.clone() if watch else None
        trace: list[torch.Tensor] = []
        for _ in range(int(self.steps)):
            delta.requires_grad_(True)
            logits = self.model(x + delta)
            per_example = objective(logits).float()
            loss = per_example.sum()
            if self.keep_trace:
                trace.append(per_example.detach())  # on the device: one copy at the end, none per step
            if watch:
                with torch.no_grad():
                    new = (logits.argmax(1) != self.labels) & ~found
                    kept = torch.where(new.view(-1, *([1] * (x.dim() - 1))), (x + delta).detach(), kept)
                    found |= new
            (grad,) = torch.autograd.grad(loss, delta)
            if self.momentum:
                grad = grad / grad.abs().flatten(1).mean(1).clamp_min(1e-12).view(-1, *([1] * (x.dim() - 1)))
                velocity = self.momentum * velocity + grad
                grad = velocity
            with torch.no_grad():
                delta = project(delta + step * steepest_step(grad, self.norm), self.eps, self.norm)
                delta = (x + delta).clamp(0, 1) - x
        if self.keep_trace:
            self.loss_trace = torch.stack(trace).to("cpu") if trace else torch.zeros(0, len(x))
        last = (x + delta).detach()
        if watch:
            return torch.where(found.view(-1, *([1] * (x.dim() - 1))), kept, last)
        return last


@register
class FGSM(declared.FGSM, PGD):
    """FGSM (Goodfellow et al. 2015): one step of size ``step_size`` (default eps) along the gradient sign
    (L-inf) or the normalised gradient (L2, the fast gradient method), from x itself (no random start unless
    ``random_start``), clipped to [0, 1]. Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1]."""


@register
class MIM(declared.MIM, PGD):
    """MIM / MI-FGSM (Dong et al. 2018): ``steps`` steps of size ``step_size`` (default eps / steps) along the
    sign of the accumulated gradient g <- momentum * g + grad / mean|grad| (the Generalist code divides by the
    mean absolute value; Dong et al. by the L1 norm, the same direction), no random start by default.
    Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1]."""


@register
class CW(declared.CW, PGD):
    """CW-inf as TRADES, FAT and the Generalist code evaluate it: PGD on the margin loss
    max_{j != y} z_j - z_y clipped at ``kappa`` (default 50), from a uniform random start, clipped to [0, 1]
    unless ``clip_start: false`` (the Generalist code's). Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1].
    (Not the L2 Carlini-Wagner optimisation attack.)"""


@register
class PGDDLR(declared.PGDDLR, PGD):
    """PGD on Croce & Hein's DLR loss (untargeted), from a uniform random start.
    Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1]."""


@register
class TargetedPGD(declared.TargetedPGD, PGD):
    """T-PGD: PGD towards each of the ``target_classes`` classes the model ranks highest after its top one
    (ranked on the clean input, as APGD-T chooses its targets), one after the other on the examples not yet
    broken. ``loss``: ce (minimise the cross-entropy of the target), cw (the target's margin) or dlr (the
    targeted DLR loss). An example counts as broken when it is misclassified (any class): robust accuracy
    is the untargeted worst case over the targets. Threat model: ||x_adv - x|| <= eps, x_adv in [0, 1]."""

    def _perturb(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.loss not in TARGETED_LOSSES:
            raise AttackError(f"{self.name}: unknown loss {self.loss!r}; allowed: {sorted(TARGETED_LOSSES)}")
        loss_fn, kappa = TARGETED_LOSSES[self.loss], float(self.kappa)
        gen = self.generator(x.device)
        with torch.no_grad():
            ranking = self.model(x).argsort(dim=1, descending=True)
        n_targets = min(int(self.target_classes), ranking.shape[1] - 1)
        best = x.clone()
        broken = torch.zeros(len(x), dtype=torch.bool, device=x.device)
        for rank in range(1, n_targets + 1):
            for _ in range(int(self.restarts)):
                idx = (~broken).nonzero().squeeze(1)
                if idx.numel() == 0:
                    return best
                yi, ti = y[idx], ranking[idx, rank]
                x_adv = self._one_run(x[idx], lambda logits, yi=yi, ti=ti: loss_fn(logits, yi, ti, kappa), gen)
                fooled = ~still_right(self.model, x[idx], x_adv, yi, self.eps, self.norm)[0]
                best[idx] = x_adv
                broken[idx] = fooled
        return best
