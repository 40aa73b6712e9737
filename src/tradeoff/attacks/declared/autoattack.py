"""The declarations of AutoAttack and of each of its attacks alone (their defaults are AutoAttack standard's):
:mod:`tradeoff.attacks.autoattack` runs them with the authors' code."""

from __future__ import annotations

from tradeoff.attacks.declared.base import DECLARED, SEED, AttackDeclaration, declare, target_count
from tradeoff.core.params import FLAG, INTEGER, LIST, NUMBER, TEXT, Param, Params
from tradeoff.core.passes import BI, F, G, Passes
from tradeoff.core.ranges import between, count

STANDARD = ("apgd-ce", "apgd-t", "fab-t", "square")
COMPONENTS = ("apgd-ce", "apgd-dlr", "apgd-t", "fab", "fab-t", "square")

# The parameters of AutoAttack's attacks, each declared once (their defaults are AutoAttack standard's).
STEPS = Param("steps", INTEGER, 100, range=count(), meaning="iterations (per restart, per target)")
RESTARTS = Param("restarts", INTEGER, 1, range=count(), meaning="runs from fresh starts")
RHO = Param("rho", NUMBER, 0.75, range=between(0, 1, low_open=True, high_open=True),
            meaning="APGD's step-size checkpoint ratio")
TARGETS = Param("target_classes", INTEGER, 9, range=count(), meaning="the targets: the classes ranked next")
QUERIES = Param("queries", INTEGER, 5000, range=count(), meaning="Square's queries")


class AutoAttackFamily(AttackDeclaration):
    norms = ("linf", "l2")


class APGDFamily(AutoAttackFamily):
    parameters = Params(STEPS, RESTARTS, RHO, Param("best_loss", FLAG, False, meaning="return the point of highest "
                                                    "loss for every example (training)"), SEED)

    @classmethod
    def passes(cls, p, classes: int) -> Passes:
        """The clean pass, then per restart its steps and the gradient at the start."""
        return F + int(p.restarts) * (int(p.steps) + 1) * G


@declare
class APGDCE(APGDFamily):
    name = "apgd-ce"


@declare
class APGDDLR(APGDFamily):
    name = "apgd-dlr"


@declare
class APGDT(AutoAttackFamily):
    name = "apgd-t"
    parameters = Params(STEPS, RESTARTS, TARGETS, RHO, SEED)

    @classmethod
    def passes(cls, p, classes: int) -> Passes:
        """The clean pass, then per target and restart APGD's steps and a success check."""
        return F + target_count(p.target_classes, classes) * int(p.restarts) * ((int(p.steps) + 1) * G + F)


@declare
class FAB(AutoAttackFamily):
    name = "fab"
    parameters = Params(STEPS, RESTARTS, SEED)

    @classmethod
    def passes(cls, p, classes: int) -> Passes:
        """Per restart: every step's two forward passes and the Jacobian of every class, and three checks."""
        return int(p.restarts) * (int(p.steps) * (2 * F + classes * BI) + 3 * F)


@declare
class FABT(AutoAttackFamily):
    name = "fab-t"
    parameters = Params(STEPS, RESTARTS, TARGETS, SEED)

    @classmethod
    def passes(cls, p, classes: int) -> Passes:
        """The clean pass, then per target and restart its steps (two forward passes and one gradient each)."""
        return F + target_count(p.target_classes, classes) * int(p.restarts) * (int(p.steps) + 1) * (2 * F + BI)


@declare
class Square(AutoAttackFamily):
    name = "square"
    parameters = Params(QUERIES, Param("p_init", NUMBER, 0.8, range=between(0, 1, low_open=True),
                                       meaning="the initial fraction of pixels a square changes"), RESTARTS, SEED)

    @classmethod
    def passes(cls, p, classes: int) -> Passes:
        """Per restart, a forward pass per query and three more."""
        return int(p.restarts) * (int(p.queries) + 3) * F


@declare
class AutoAttack(AutoAttackFamily):
    name = "autoattack"
    # steps: APGD's and FAB's iterations; queries: Square's (the standard version's 100 and 5000; smaller only
    # when the smoke scale caps attack steps)
    parameters = Params(Param("components", LIST, None, item=TEXT, choices=COMPONENTS, nullable=True,
                              nonempty=True, meaning="the attacks run in turn (null: AutoAttack standard's)"),
                        STEPS, QUERIES, SEED)

    @classmethod
    def passes(cls, p, classes: int) -> Passes:
        """The clean pass, then each component on every example (an upper bound: a later component sees only the
        examples still robust) with its ``steps`` and ``queries``, and its success check."""
        total = F
        for component in p.components or STANDARD:
            kind = DECLARED[component]
            given = {k: getattr(p, k) for k in ("steps", "queries") if k in kind.parameters}
            total = total + kind.passes(kind.parameters.settings(given, f"attack {component!r}"), classes) + F
        return total

    @classmethod
    def evaluation_passes(cls, p, classes: int) -> Passes:
        """Its own chain classifies: no classification after it."""
        return F + cls.passes(p, classes)
