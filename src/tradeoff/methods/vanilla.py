"""Vanilla adversarial training as CA-AT writes it (its Eq. 2):

    loss = lam * L_adv + (1 - lam) * L_clean,    i.e. the update g = lam * g_a + (1 - lam) * g_c,

with L_clean = CE(f(x), y) and the adversarial loss picked by ``adv_loss`` (CA-AT trains with three):

- ``ce``: L_adv = CE(f(x'), y), x' from the run's training attack (any registry attack);
- ``trades``: L_adv = KL(f(x) || f(x')) / batch, x' from TRADES' KL maximiser (the regulariser alone, as the
  CA-AT code's TRADES loss; its CE is L_clean);
- ``clp``: L_adv = mean ||softmax(f(x')) - softmax(f(x))||_2, x' from the training attack.

lam = 0 is natural training and lam = 1 with ``ce`` is Madry's PGD-AT; neither computes the loss it weights
by 0. With ``track_conflict: true`` the two gradients are computed separately and the step reports CA-AT's
gradient conflict mu = ||g_c|| ||g_a|| (1 - cos(g_c, g_a)) (one more backward pass per step).
"""

from __future__ import annotations

from typing import Callable

from tradeoff.attacks.declared.base import attack_passes
from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.params import FLAG, NUMBER, TEXT, Param
from tradeoff.core.passes import BW, NONE
from tradeoff.core.passes import F as FORWARD
from tradeoff.core.ranges import PROBABILITY
from tradeoff.methods.base import register
from tradeoff.methods.clp import softmax_distance
from tradeoff.methods.common import Adversarial
from tradeoff.methods.trades import kl_adversarial_from_spec, kl_divergence, kl_passes

torch = LazyModule("torch")
F = LazyModule("torch.nn.functional")

ADV_LOSSES = ("ce", "trades", "clp")


def gradient_conflict(g_adv: torch.Tensor, g_clean: torch.Tensor) -> dict[str, torch.Tensor]:
    """CA-AT's conflict mu = ||g_c|| ||g_a|| (1 - cos), with the cosine and both norms (flat gradients)."""
    norm_a, norm_c = g_adv.norm(), g_clean.norm()
    cos = torch.dot(g_adv, g_clean) / (norm_a * norm_c)
    return {"mu": norm_c * norm_a * (1 - cos), "cos": cos, "norm_gc": norm_c, "norm_ga": norm_a}


class TwoLosses(Adversarial):
    """A clean and an adversarial loss on the same batch, combined per step (vanilla AT, CA-AT)."""

    # the training attack runs with the model in eval mode, as the CA-AT code's (ctx_noparamgrad_and_eval; the paper
    # does not say): only BatchNorms that keep running statistics (the ResNet stem's) tell the modes apart
    parameters = Adversarial.parameters.extend(
        Param("adv_loss", TEXT, "ce", choices=ADV_LOSSES, meaning="the adversarial loss"), attack_mode="eval")
    own_maximiser = ("adv_loss", "trades")  # the TRADES loss: TRADES' KL maximiser

    @classmethod
    def step_passes(cls, p, classes, *, lam: float, combined: bool):
        """A step that weights the adversarial loss by ``lam`` (the clean one by 1 - lam), each computed only where
        its weight is not 0, or with ``combined`` both, as two gradients (the clean one, then the adversarial one,
        through the clean pass too unless its loss is CE)."""
        kind = p.adv_loss
        adv, clean = lam > 0 or combined, lam < 1 or combined
        maximiser = (kl_passes(p.attack) if kind == "trades" else attack_passes(p.attack, classes)) if adv else NONE
        if combined:
            return maximiser + 2 * FORWARD + (2 * BW if kind == "ce" else 3 * BW)
        passes = int(adv) + int(clean or (adv and kind != "ce"))
        return maximiser + passes * (FORWARD + BW)

    def adversarial(self, x, y):
        if self.p.adv_loss == "trades":
            return kl_adversarial_from_spec(self.model, x, self.p.attack, self.runtime, self.budget_scale)
        return super().adversarial(x, y)

    def losses(self, x, y, *, clean: bool = True, adv: bool = True):
        """(L_clean or None, L_adv or None, the logits accuracy is reported on: adversarial when computed)."""
        kind = self.p.adv_loss
        x_adv = self.adversarial(x, y) if adv else None
        logits_clean = logits_adv = None
        with self.runtime.autocast():  # separate passes: each batch normalised with its own statistics
            if adv:
                logits_adv = self.model(x_adv)
            if clean or (adv and kind != "ce"):
                logits_clean = self.model(x)
        l_clean = F.cross_entropy(logits_clean.float(), y) if clean else None
        l_adv = None
        if adv:
            l_adv = {"ce": lambda: F.cross_entropy(logits_adv.float(), y),
                     "trades": lambda: kl_divergence(logits_adv, logits_clean) / len(x),
                     "clp": lambda: softmax_distance(logits_adv, logits_clean)}[kind]()
        return l_clean, l_adv, logits_adv if adv else logits_clean

    def combined_step(self, x, y, combine: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> dict:
        """One optimizer step along combine(g_a, g_c) of the flat gradients over all trainable parameters."""
        self.model.train()
        l_clean, l_adv, logits = self.losses(x, y)
        params = [p for p in self.model.parameters() if p.requires_grad]
        g_clean = _flat(torch.autograd.grad(l_clean, params, retain_graph=True, allow_unused=True), params)
        g_adv = _flat(torch.autograd.grad(l_adv, params, allow_unused=True), params)
        update = combine(g_adv, g_clean)
        offset = 0
        for p in params:
            p.grad = update[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"correct": (logits.detach().argmax(1) == y).sum(), "clean_loss": l_clean.detach(),
                "adv_loss": l_adv.detach(), **{k: v.detach() for k, v in gradient_conflict(g_adv, g_clean).items()}}


def _flat(grads, params) -> torch.Tensor:
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for g, p in zip(grads, params)])


@register
class Vanilla(TwoLosses):
    name = "vanilla"
    parameters = TwoLosses.parameters.extend(
        Param("lam", NUMBER, 0.5, range=PROBABILITY, meaning="(1 - lam) clean loss + lam adversarial loss"),
        Param("track_conflict", FLAG, False, meaning="report CA-AT's gradient conflict (one more backward pass)"))

    @classmethod
    def passes(cls, p, classes):
        return cls.step_passes(p, classes, lam=float(p.lam), combined=bool(p.track_conflict))

    def loss(self, x, y):
        lam = float(self.p.lam)
        l_clean, l_adv, logits = self.losses(x, y, clean=lam < 1, adv=lam > 0)
        if l_adv is None:
            return l_clean, logits
        if l_clean is None:
            return l_adv, logits
        return lam * l_adv + (1 - lam) * l_clean, logits

    def train_step(self, x, y):
        if not self.p.track_conflict:
            return super().train_step(x, y)
        lam = float(self.p.lam)
        out = self.combined_step(x, y, lambda g_adv, g_clean: lam * g_adv + (1 - lam) * g_clean)
        return {"loss": lam * out["adv_loss"] + (1 - lam) * out["clean_loss"], **out}
