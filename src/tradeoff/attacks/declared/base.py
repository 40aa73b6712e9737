"""The declaration of an attack (see :mod:`tradeoff.attacks.declared`) and their registry."""

from __future__ import annotations

from typing import Any, ClassVar

from tradeoff.core.params import INTEGER, Param, Params
from tradeoff.core.registry import Registry
from tradeoff.core.spec import AttackSpec

NORMS = ("linf", "l2")

#: the random starts an attack may draw (``start``): ``uniform`` a uniform point of the eps-ball; ``uniform_radius``
#: (L2 only) a Gaussian direction at a radius uniform in [0, eps], as torchattacks' PGDL2 starts; ``normal``
#: x + 0.001 N(0, 1) whatever eps is, as the training attacks of TRADES', FAT's and RST's code start
STARTS = ("uniform", "uniform_radius", "normal")

#: the seed of an evaluation's random draws (null: the global RNG, as in training)
SEED = Param("seed", INTEGER, None, nullable=True, meaning="the seed of the attack's random draws")


class AttackDeclaration:
    """What the configuration knows of an attack type. Subclasses set ``name``, ``norms``, ``parameters`` (every
    parameter besides the budget) and the settings the type holds fixed (class constants), and may say how far its
    steps reach (``reach``)."""

    name: ClassVar[str]
    norms: ClassVar[tuple[str, ...]] = NORMS
    #: every parameter the attack takes besides its budget (eps, norm), declared once: its default, kind, range and
    #: choices, checked when the config is resolved (before any job) and when the attack is built
    parameters: ClassVar[Params] = Params()
    #: every parameter with its default, derived from ``parameters``
    defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "parameters" in vars(cls):  # where the parameters are declared (an implementation inherits both)
            cls.defaults = cls.parameters.defaults()

    @classmethod
    def settings(cls, spec: AttackSpec) -> Any:
        """The parameters of this type in a spec, each at its value (a declared one not given at its default), as the
        fields of a frozen object: what a built attack holds as attributes, read without building it."""
        return cls.parameters.settings(dict(spec.params), f"attack {cls.name!r}")

    @classmethod
    def reach(cls, spec: AttackSpec) -> tuple[float, float] | None:
        """For an attack that walks steps of a fixed size: (how far its steps can move an input, in its norm; how far
        they must be able to, to reach every point of the eps-ball from where they start) for a resolved spec (eps
        and step_size numbers). None for attacks that choose their own steps (APGD, FAB, Square) or none."""
        return None


#: name -> the declaration of every attack type
DECLARED = Registry("attack declaration")
declare = DECLARED.register  # @declare on an AttackDeclaration subclass with its `name`
