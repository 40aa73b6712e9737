"""The declaration of a training method (see :mod:`tradeoff.methods.declared`), their registry, and what the
adversarial methods' declarations share: the training attack and the model's mode while it runs."""

from __future__ import annotations

from typing import ClassVar

from tradeoff.attacks.declared.pgd import PGD
from tradeoff.core.params import ATTACK, TEXT, Param, Params
from tradeoff.core.registry import Registry
from tradeoff.core.spec import AttackSpec


class MethodDeclaration:
    """What the configuration knows of a method. Subclasses set ``name`` and ``parameters``."""

    name: ClassVar[str]
    #: every parameter the method takes, declared once (tradeoff.core.params): its default, its kind, range and choices,
    #: whether it is optional (off by default), epoch-valued, a learning rate, an attack, an observer
    parameters: ClassVar[Params] = Params()

    @classmethod
    def check_params(cls, spec: dict) -> None:
        """What the declaration of each parameter cannot say (several parameters together, the run's length, the
        resolved training attack): raise ValueError naming the parameter and what is allowed. Called when the config
        is resolved, before any job starts, and when the method is built.

        ``spec`` is the run's settings in their JSON form (a dict: ``spec["method"]`` the method's name and
        parameters, ``spec["epochs"]``), as the resolver holds them while it builds them (tradeoff.config.resolve);
        a built method passes its RunSpec's ``as_dict()``."""

    @classmethod
    def canonical(cls, method: dict) -> dict:
        """The resolved parameters as the method uses them: a value it rounds, rounded (Generalist's communication
        period in whole epochs). Runs that compute the same thing then have the same settings, share one training
        job, and a table says they are one model, instead of showing copies as a sweep. Called by the resolver only,
        with the method's settings as the dict it builds (``name`` and every parameter)."""
        return method


#: name -> the declaration of every method
DECLARED = Registry("method declaration")
declare = DECLARED.register  # @declare on a MethodDeclaration subclass with its `name`


def method_names() -> list[str]:
    return sorted(DECLARED)


#: the training attack of an adversarial method: the name of one of the catalog's (train_attacks or attacks)
TRAINING_ATTACK = Param("attack", ATTACK, "pgd10", meaning="the training attack (train_attacks or attacks)")
#: the model's mode while the training attack runs (BatchNorm sees the attack's batches in train mode)
ATTACK_MODE = Param("attack_mode", TEXT, "train", choices=("train", "eval"),
                    meaning="the model's mode while the training attack runs")


class Adversarial(MethodDeclaration):
    """A single learner trained on its training attack's examples, run in ``attack_mode``."""

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


def check_pgd_budget(method_name: str, spec: AttackSpec | dict) -> None:
    """A method's own maximiser (TRADES' KL ascent, FAT's early-stopped PGD) reads only the budget, steps and
    step size of a plain `pgd` training attack; refuse a spec whose other settings it would silently ignore. (The
    resolver checks the spec in its JSON form, a built method its AttackSpec.)"""
    spec = AttackSpec.from_dict(spec)
    plain = spec.type == PGD.name and PGD.settings(spec).loss == "ce" and not PGD.settings(spec).momentum
    if not plain:
        raise ValueError(f"{method_name}: its own inner maximiser takes eps, norm, steps and step_size from a "
                         f"plain `pgd` training attack (CE loss, no momentum), got {spec.as_dict()}")
