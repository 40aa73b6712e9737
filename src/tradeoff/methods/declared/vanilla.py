"""The declaration of vanilla adversarial training as CA-AT writes it, and of the clean-plus-adversarial losses it
shares with CA-AT: :mod:`tradeoff.methods.vanilla`."""

from __future__ import annotations

from tradeoff.core.params import FLAG, NUMBER, TEXT, Param
from tradeoff.core.ranges import PROBABILITY
from tradeoff.methods.declared.base import Adversarial, declare

ADV_LOSSES = ("ce", "trades", "clp")


class TwoLosses(Adversarial):
    """A clean and an adversarial loss on the same batch, combined per step (vanilla AT, CA-AT)."""

    # the training attack runs with the model in eval mode, as the CA-AT code's (ctx_noparamgrad_and_eval; the paper
    # does not say): only BatchNorms that keep running statistics (the ResNet stem's) tell the modes apart
    parameters = Adversarial.parameters.extend(
        Param("adv_loss", TEXT, "ce", choices=ADV_LOSSES, meaning="the adversarial loss"), attack_mode="eval")
    own_maximiser = ("adv_loss", "trades")  # the TRADES loss: TRADES' KL maximiser


@declare
class Vanilla(TwoLosses):
    name = "vanilla"
    parameters = TwoLosses.parameters.extend(
        Param("lam", NUMBER, 0.5, range=PROBABILITY, meaning="(1 - lam) clean loss + lam adversarial loss"),
        Param("track_conflict", FLAG, False, meaning="report CA-AT's gradient conflict (one more backward pass)"))
