"""What the adversarial methods share: their training attack (a parameter naming one of the catalog's), the mode the
model is in while it runs, the single learner trained on its examples (:class:`Adversarial`), and the budget of a
method's own maximiser (TRADES' KL ascent, FAT's early-stopped PGD)."""

from __future__ import annotations

from typing import ClassVar

from tradeoff import attacks
from tradeoff.attacks.declared.pgd import PGD
from tradeoff.core.params import ATTACK, TEXT, Param, Params
from tradeoff.core.spec import AttackSpec
from tradeoff.methods.base import SingleLearner

#: the training attack of an adversarial method: the name of one of the catalog's (train_attacks or attacks)
TRAINING_ATTACK = Param("attack", ATTACK, "pgd10", meaning="the training attack (train_attacks or attacks)")
#: the model's mode while the training attack runs (BatchNorm sees the attack's batches in train mode)
ATTACK_MODE = Param("attack_mode", TEXT, "train", choices=("train", "eval"),
                    meaning="the model's mode while the training attack runs")


class Adversarial(SingleLearner):
    """A single learner trained on its training attack's examples (``self.attack``, built from its ``attack``
    parameter), run in ``attack_mode``."""

    parameters = Params(TRAINING_ATTACK, ATTACK_MODE)
    #: (parameter, value): at that value the method runs a maximiser of its own, which reads only the budget, steps
    #: and step size of its training attack (check_pgd_budget); None: it always runs the training attack
    own_maximiser: ClassVar[tuple[str, str] | None] = None

    @classmethod
    def check_params(cls, spec):
        if cls.own_maximiser is not None:
            name, value = cls.own_maximiser
            if spec["method"].get(name, cls.parameters[name].default) == value:
                check_pgd_budget(cls.name, spec["method"]["attack"])

    def __init__(self, spec, build_model, runtime):
        super().__init__(spec, build_model, runtime)
        self.attack = attacks.from_spec(self.p.attack, self.model)  # (the attacks' code: PyTorch)

    def adversarial(self, x, y):
        return adversarial_examples(self, x, y)


def adversarial_examples(method: SingleLearner, x, y):
    """The training attack's examples of a batch, the model in the method's ``attack_mode`` while it runs (then back
    in train mode)."""
    model = method.model
    model.train(method.p.attack_mode == "train")
    with method.runtime.autocast():
        x_adv = method.attack.perturb(x, y)
    model.train()
    return x_adv


def check_pgd_budget(method_name: str, spec: AttackSpec | dict) -> None:
    """A method's own maximiser (TRADES' KL ascent, FAT's early-stopped PGD) reads only the budget, steps and
    step size of a plain `pgd` training attack; refuse a spec whose other settings it would silently ignore. (The
    resolver checks the spec in its JSON form, a built method its AttackSpec.)"""
    spec = AttackSpec.from_dict(spec)
    plain = spec.type == PGD.name and PGD.settings(spec).loss == "ce" and not PGD.settings(spec).momentum
    if not plain:
        raise ValueError(f"{method_name}: its own inner maximiser takes eps, norm, steps and step_size from a "
                         f"plain `pgd` training attack (CE loss, no momentum), got {spec.as_dict()}")


def own_steps(spec: AttackSpec) -> int:
    """The steps of a method's own maximiser: its plain `pgd` training attack's (check_pgd_budget)."""
    return int(PGD.settings(spec).steps)


def attack_budget(spec: AttackSpec, scale: float = 1.0) -> tuple[float, str, int, float]:
    """(eps, norm, steps, step size) of a resolved training-attack spec (a plain `pgd`: check_pgd_budget), for the
    methods' own maximisers; the step size defaults to PGD's (``PGD.step_for``: eps / 4). ``scale`` (the method's
    budget_scale, < 1 during an eps warm-up) multiplies eps and the step size."""
    eps, step, steps = float(spec.eps) * scale, spec.step_size, own_steps(spec)
    return eps, str(spec.norm), steps, PGD.step_for(eps, steps) if step is None else float(step) * scale
