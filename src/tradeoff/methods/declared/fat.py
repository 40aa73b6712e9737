"""The declaration of Friendly Adversarial Training (FAT): :mod:`tradeoff.methods.fat`."""

from __future__ import annotations

from tradeoff.core.params import FLAG, INTEGER, LIST, NUMBER, TEXT, Param, Params
from tradeoff.core.ranges import at_least, count
from tradeoff.methods.declared.base import TRAINING_ATTACK, MethodDeclaration, check_pgd_budget, declare


@declare
class FAT(MethodDeclaration):
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
