"""The declaration of an attack (see :mod:`tradeoff.attacks.declared`), their registry, and what an attack costs
(:func:`attack_passes`, from the passes each declaration declares)."""

from __future__ import annotations

from typing import Any, ClassVar

from tradeoff.core.params import INTEGER, Param, Params
from tradeoff.core.passes import F, Passes, UnknownCost
from tradeoff.core.plugins import discover
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
    def setting(cls, p: Any, name: str) -> Any:
        """A setting's value: the parameter's in ``p`` (``settings``) where the type declares it, else the constant
        the type holds it at (FGSM's one step, MIM's one restart)."""
        return getattr(p, name) if name in cls.parameters else getattr(cls, name)

    @classmethod
    def passes(cls, p: Any, classes: int) -> Passes:
        """What ``perturb`` costs per attacked example (no final classification), from the type's settings ``p``
        (``settings``) and the model's number of classes: tradeoff.core.passes, checked against PyTorch's FLOP counter
        by tests/test_costs.py. Every attack type declares it."""
        raise UnknownCost(f"attack {cls.name!r} declares no passes ({cls.__module__}.{cls.__qualname__}.passes)")

    @classmethod
    def evaluation_passes(cls, p: Any, classes: int) -> Passes:
        """One evaluation of one test example (tradeoff.attacks.loop.run_attack): the clean pass, the attack
        and the classification of its result."""
        return F + cls.passes(p, classes) + F

    @classmethod
    def reach(cls, spec: AttackSpec) -> tuple[float, float] | None:
        """For an attack that walks steps of a fixed size: (how far its steps can move an input, in its norm; how far
        they must be able to, to reach every point of the eps-ball from where they start) for a resolved spec (eps
        and step_size numbers). None for attacks that choose their own steps (APGD, FAB, Square) or none."""
        return None


#: name -> the declaration of every attack type: every module of tradeoff.attacks.declared, and the installed
#: plug-ins' (the entry points of the group ``tradeoff.attacks``), imported when it is first read
DECLARED = Registry("attack declaration",
                    discover=lambda: discover("tradeoff.attacks.declared", group="tradeoff.attacks"))
declare = DECLARED.register  # @declare on an AttackDeclaration subclass with its `name`


def target_count(wanted: Any, classes: int) -> int:
    """How many target classes a targeted attack runs: the ``target_classes`` wanted, at most the other classes."""
    return max(1, min(int(wanted), classes - 1))


def declaration(spec: AttackSpec) -> type[AttackDeclaration]:
    """The declaration of a spec's attack type; UnknownCost when none has its name."""
    found = DECLARED.get(spec.type)
    if found is None:
        raise UnknownCost(f"no attack declares the type {spec.type!r} (tradeoff.attacks.declared)")
    return found


def priced_settings(spec: AttackSpec) -> Any:
    """The settings an attack's cost reads: its type's parameters at their values in the spec (one given as null at
    its default; a key its type does not declare is no setting of it: the audit prices a spec's budget under another
    type)."""
    cls = declaration(spec)
    given = {k: v for k, v in spec.params.items() if v is not None and k in cls.parameters}
    return cls.parameters.settings(given, f"attack {spec.type!r}")


def attack_passes(spec: AttackSpec | dict, classes: int) -> Passes:
    """What ``perturb`` of a resolved attack costs per attacked example, as its type declares (``passes``)."""
    spec = AttackSpec.from_dict(spec)  # a method's training attack in its JSON form is a mapping
    return declaration(spec).passes(priced_settings(spec), classes)


def evaluation_passes(spec: AttackSpec | dict, classes: int) -> Passes:
    """One evaluation of one test example under a resolved attack, as its type declares (``evaluation_passes``)."""
    spec = AttackSpec.from_dict(spec)
    return declaration(spec).evaluation_passes(priced_settings(spec), classes)
