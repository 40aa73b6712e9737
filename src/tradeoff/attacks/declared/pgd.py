"""The declarations of the projected gradient attacks and those that are PGD with other settings (FGSM, MIM, CW-inf,
PGD-DLR, targeted PGD): :mod:`tradeoff.attacks.pgd` says what each computes."""

from __future__ import annotations

from tradeoff.attacks.declared.base import SEED, STARTS, AttackDeclaration, declare, target_count
from tradeoff.core.params import FLAG, INTEGER, NUMBER, STEP, TEXT, Param, Params
from tradeoff.core.passes import NONE, F, G, Passes
from tradeoff.core.ranges import at_least, count
from tradeoff.core.spec import AttackSpec

#: the losses the steps may ascend (tradeoff.attacks.pgd.LOSSES), and towards a target (TARGETED_LOSSES)
LOSS_NAMES = ("ce", "cw", "dlr")
TARGETED_LOSS_NAMES = ("ce", "cw", "dlr")

# The parameters of the PGD family, each declared once; an attack of the family takes some of them, with its defaults.
STEPS = Param("steps", INTEGER, 10, range=count(), meaning="gradient steps per restart")
STEP_SIZE = Param("step_size", STEP, None, nullable=True, meaning="the step's length; null: the attack's default")
RANDOM_START = Param("random_start", FLAG, True, meaning="start from a random point (start) instead of x")
START = Param("start", TEXT, "uniform", choices=STARTS, meaning="the random start's distribution")
CLIP_START = Param("clip_start", FLAG, True, meaning="clip the random start to [0, 1]")
RESTARTS = Param("restarts", INTEGER, 1, range=count(), meaning="runs from fresh starts; the first success is kept")
LOSS = Param("loss", TEXT, "ce", choices=LOSS_NAMES, meaning="the loss the steps ascend")
KAPPA = Param("kappa", NUMBER, float("inf"), range=at_least(0), meaning="the margin's clip")
MOMENTUM = Param("momentum", NUMBER, 0.0, range=at_least(0), meaning="the decay of the accumulated gradient")
TARGET_CLASSES = Param("target_classes", INTEGER, 9, range=count(), meaning="the targets: the classes ranked next")


@declare
class PGD(AttackDeclaration):
    name = "pgd"
    parameters = Params(STEPS, STEP_SIZE.but(meaning="the step's length; null: eps / 4"), RANDOM_START, START,
                        CLIP_START, RESTARTS, LOSS, KAPPA, MOMENTUM, SEED)
    start, clip_start = "uniform", True  # for the subclasses that do not take them as parameters

    @classmethod
    def step_for(cls, eps: float, steps: int) -> float:
        """The step size when ``step_size`` is not given."""
        return eps / 4

    @classmethod
    def passes(cls, p, classes: int) -> Passes:
        """``restarts`` runs of ``steps`` gradient steps, and after each run but a single one a success check."""
        steps, restarts = int(cls.setting(p, "steps")), int(cls.setting(p, "restarts"))
        return restarts * steps * G + (restarts * F if restarts > 1 else NONE)

    @classmethod
    def reach(cls, spec: AttackSpec) -> tuple[float, float]:
        """steps x step, against eps from a start at x (none, or TRADES' x + 0.001 N(0, 1)) and 2 eps from a random
        point of the ball (which may lie on its far side)."""
        p = cls.settings(spec)
        declared = lambda name: name in cls.parameters  # noqa: E731  (else the class's own constant, or none)
        eps = float(spec.eps)
        steps = int(p.steps if declared("steps") else cls.steps)
        step = cls.step_for(eps, steps) if spec.step_size is None else float(spec.step_size)
        from_ball = (declared("random_start") and p.random_start
                     and (p.start if declared("start") else cls.start) != "normal")
        return steps * step, (2 if from_ball else 1) * eps


@declare
class FGSM(PGD):
    name = "fgsm"
    parameters = Params(STEP_SIZE.but(meaning="the step's length; null: eps"), RANDOM_START.but(default=False), LOSS,
                        SEED)
    steps, restarts, kappa, momentum = 1, 1, float("inf"), 0.0

    @classmethod
    def step_for(cls, eps: float, steps: int) -> float:
        return eps


@declare
class MIM(PGD):
    name = "mim"
    parameters = Params(STEPS, STEP_SIZE.but(meaning="the step's length; null: eps / steps"), MOMENTUM.but(default=1.0),
                        RANDOM_START.but(default=False), LOSS, SEED)
    restarts, kappa = 1, float("inf")

    @classmethod
    def step_for(cls, eps: float, steps: int) -> float:
        return eps / steps


@declare
class CW(PGD):
    name = "cw"
    parameters = Params(STEPS.but(default=20), STEP_SIZE, RANDOM_START, CLIP_START, RESTARTS, KAPPA.but(default=50.0),
                        SEED)
    loss, momentum = "cw", 0.0


@declare
class PGDDLR(PGD):
    name = "pgd-dlr"
    parameters = Params(STEPS, STEP_SIZE, RANDOM_START, RESTARTS, SEED)
    loss, kappa, momentum = "dlr", float("inf"), 0.0


@declare
class TargetedPGD(PGD):
    name = "t-pgd"
    parameters = Params(STEPS, STEP_SIZE, RANDOM_START, RESTARTS, TARGET_CLASSES,
                        LOSS.but(choices=TARGETED_LOSS_NAMES), KAPPA, SEED)
    momentum = 0.0

    @classmethod
    def passes(cls, p, classes: int) -> Passes:
        """The ranking of the classes, then for each target its restarts' steps and a success check each."""
        return F + target_count(p.target_classes, classes) * int(p.restarts) * (int(p.steps) * G + F)
