"""Typed, frozen settings of the models the catalog resolves: a run (:class:`RunSpec` and its parts) and an external
model (:class:`ExternalSpec`). ``tradeoff.config`` resolves them once from the merged configuration (presets,
defaults, the scale's mapping, the method's declared parameters); everything downstream reads fields
(``spec.selection.examples``, ``spec.method.name``), and nothing can change them.

An attack's settings are an :class:`AttackSpec` (its ``type``, its :class:`Norm`, its budget ``eps``, its
``step_size`` and the parameters its type declares): as written in the catalog (``Catalog.attacks``: a budget in the
paper dataset's terms, a sweep, a step relative to eps), and resolved for one model (``Catalog.attack_for``, a run's
selection attack and its method's training attacks: one eps, the step size a number or None). The audit's settings
are an :class:`AuditSpec` (``Catalog.audit``).

``as_dict()`` is their one JSON form (the settings digests, jobs.json, the catalog's cache): plain dicts and lists
in a fixed key order; ``from_dict`` reads it back and refuses a key it does not know. A method's parameters stay a
mapping in the run's spec (a method reads its own as the fields of its declared ``Params``, an attack among them as an
:class:`AttackSpec`), deep-frozen (:class:`FrozenDict`, tuples). No PyTorch here.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping


class FrozenDict(dict):
    """A dict that cannot be changed (its values frozen too: see :func:`freeze`): JSON writes it as a dict, ``{**d,
    key: value}`` makes a changed (plain) copy."""

    def _frozen(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("resolved settings are frozen: make a changed copy ({**spec, key: value}) instead")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _frozen  # type: ignore

    def __reduce__(self):
        return FrozenDict, (dict(self),)

    def __copy__(self) -> "FrozenDict":
        return self

    def __deepcopy__(self, memo: dict) -> "FrozenDict":
        return self


def freeze(value: Any) -> Any:
    """A settings value with every dict a FrozenDict and every list a tuple, recursively."""
    if isinstance(value, Mapping):
        return FrozenDict((k, freeze(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain JSON form of a settings value: dicts and lists (the inverse of :func:`freeze`)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    if isinstance(value, Backbone):
        return value.file
    if isinstance(value, _Spec):
        return value.as_dict()
    if isinstance(value, enum.Enum):
        return value.value
    return value


class _Spec:
    """The JSON form shared by the specs: fields in declaration order, a nested spec as its dict, an ``_OMITTED``
    field left out while it is None (a key that the resolved settings hold only when it is set)."""

    _OMITTED: ClassVar[tuple[str, ...]] = ()

    def as_dict(self) -> dict:
        return {f.name: thaw(getattr(self, f.name)) for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if not (f.name in self._OMITTED and getattr(self, f.name) is None)}

    @classmethod
    def _fields_of(cls, raw: Mapping, what: str) -> dict:
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        extra = sorted(set(raw) - set(names))
        if extra:
            raise ValueError(f"{what}: unknown setting(s) {extra}; a {cls.__name__} has {names}")
        return dict(raw)

    def replace(self, **changes: Any):
        """A copy with some fields changed (dataclasses.replace)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


class Norm(str, enum.Enum):
    """The norm of an attack's budget ball; its value is the config's word for it (``norm: l2``)."""

    LINF = "linf"
    L2 = "l2"

    def __str__(self) -> str:
        return self.value


#: the type of a catalog entry that measures accuracy on corrupted images (NROB), not an attack: its settings are
#: the corruption ``dataset`` only
CORRUPTIONS_TYPE = "corruptions"

#: the settings of an attack that are fields of its spec; every other key is a parameter of its type
_ATTACK_FIELDS = ("type", "norm", "eps", "step_size", "dataset", "shards")


@dataclass(frozen=True)
class AttackSpec(_Spec):
    """An attack's settings (an entry of ``attacks:`` / ``train_attacks:``), typed.

    Resolved for a model (``Catalog.attack_for``; a run's selection and training attacks): ``eps`` is its budget (a
    number), ``norm`` always set, ``step_size`` the step's length (a number) or None where the attack chooses its own
    (the resolver derives it once: relative steps, the scale's budget ratio and step caps). As written
    (``Catalog.attacks``): ``eps`` is the budget at the paper's dataset as written (a number, a fraction text such as
    ``"8/255"``, None for the dataset's standard budget, or a tuple of them: a budget sweep), ``step_size`` as written
    (``"eps/4"``), ``shards`` the jobs it is split into. An entry of type ``corruptions`` has a ``dataset`` and no
    norm. ``params`` holds the parameters its type declares (tradeoff.attacks: ``steps``, ``loss``, ...) as given.

    ``form`` lists the keys of its JSON form in order (which optional settings it holds: a resolved sweep budget says
    ``step_size: None``, another attack leaves it out), so that ``as_dict`` is exactly the dict the settings
    digests hashed before the settings were typed."""

    type: str
    norm: Norm | None = Norm.LINF
    eps: Any = None
    step_size: Any = None
    params: FrozenDict = field(default_factory=FrozenDict)
    dataset: str | None = None
    shards: int | None = None
    form: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.form:  # made from its fields: its JSON form holds every setting that is set
            given = [k for k in _ATTACK_FIELDS if getattr(self, k) is not None]
            object.__setattr__(self, "form", tuple(given) + tuple(self.params))

    @classmethod
    def from_dict(cls, raw: "Mapping | AttackSpec") -> "AttackSpec":
        """The spec of an attack's JSON form (an AttackSpec as it is). ValueError for a norm it does not know."""
        if isinstance(raw, AttackSpec):
            return raw
        if "type" not in raw:
            raise ValueError(f"an attack's settings need its type, got {dict(raw)}")
        norm = raw.get("norm", None if raw["type"] == CORRUPTIONS_TYPE else Norm.LINF.value)
        try:
            norm = None if norm is None else Norm(norm)
        except ValueError:
            raise ValueError(f"an attack's norm: {norm!r} is not one of {[n.value for n in Norm]}") from None
        eps = raw.get("eps")
        return cls(type=raw["type"], norm=norm, eps=tuple(eps) if isinstance(eps, (list, tuple)) else eps,
                   step_size=raw.get("step_size"), dataset=raw.get("dataset"), shards=raw.get("shards"),
                   params=freeze({k: v for k, v in raw.items() if k not in _ATTACK_FIELDS}), form=tuple(raw))

    def as_dict(self) -> dict:
        return {k: thaw(getattr(self, k) if k in _ATTACK_FIELDS else self.params[k]) for k in self.form}

    def replace(self, **changes: Any) -> "AttackSpec":
        """A copy with some settings changed (a parameter by its name too), each one in its JSON form."""
        fields = {k: v for k, v in changes.items() if k in _ATTACK_FIELDS}
        params = {k: v for k, v in changes.items() if k not in _ATTACK_FIELDS}
        if "norm" in fields and fields["norm"] is not None:
            fields["norm"] = Norm(fields["norm"])
        if "eps" in fields and isinstance(fields["eps"], list):
            fields["eps"] = tuple(fields["eps"])
        form = self.form + tuple(k for k in changes if k not in self.form)
        return dataclasses.replace(self, **fields, params=freeze({**self.params, **params}), form=form)

    def without(self, *params: str) -> "AttackSpec":
        """A copy without some of its type's parameters (each then at its type's default)."""
        return dataclasses.replace(self, params=FrozenDict((k, v) for k, v in self.params.items() if k not in params),
                                   form=tuple(k for k in self.form if k not in params or k in _ATTACK_FIELDS))

    @property
    def corruptions(self) -> bool:
        """Whether the entry measures accuracy on corrupted images (NROB), not under an attack."""
        return self.type == CORRUPTIONS_TYPE

    @property
    def clean(self) -> bool:
        """Whether the entry is the clean evaluation (no attack)."""
        return self.type == "clean"

    @property
    def sweep(self) -> bool:
        """Whether the entry (as written) sweeps budgets: one evaluation per budget (``<attack>@<label>``)."""
        return isinstance(self.eps, tuple)

    @property
    def standard_budget(self) -> bool:
        """Whether the entry (as written) takes the dataset's standard budget for its norm (no eps given)."""
        return self.eps is None


#: the clean evaluation (no attack): accuracy on the images as they are
CLEAN = AttackSpec.from_dict({"type": "clean", "eps": 0.0})


def attack_spec(value: Any) -> Any:
    """An attack's settings typed: a mapping as an AttackSpec, anything else (a name not yet resolved, None) as it
    is."""
    return AttackSpec.from_dict(value) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class AuditSpec(_Spec):
    """The audit's settings (the configuration's ``audit:`` block, ``Catalog.audit``), typed: the test examples, the
    names of its attacks (``attack``, ``black_box``, ``autoattack``: catalog attacks, resolved per model by
    ``Catalog.attack_for``), the transfer check's ``surrogates`` per dataset, what its checks vary and their rules'
    thresholds (docs/audit.md), and the tables whose rows' models every build audits (``build``).

    Made from its fields (an auditor run from Python: ``AuditSpec(restarts=10)``), the checks' settings take the
    defaults below; read from the configuration (``from_dict``), every key the schema requires is given. ``form``
    lists the keys of its JSON form in order (as written: ``build`` only where it is), so that ``as_dict`` is the
    block as written, which the audit's record and its jobs' settings hold."""

    examples: int | None = None                  # the first N test examples of the fixed permutation (None: all)
    attack: str | None = None                    # the white-box attack (type pgd) whose settings the checks vary
    black_box: str | None = None                 # the gradient-free attack (type square), None: no black-box check
    autoattack: str | None = None                # AutoAttack in the audit's suite, None: left out
    surrogates: FrozenDict = field(default_factory=FrozenDict)  # dataset -> the transfer check's surrogates
    step_multipliers: tuple[int, ...] = (1, 10)  # APGD-CE at these multiples of the attack's steps (convergence)
    restarts: int = 5                            # most random restarts of the restart curve
    eps_multipliers: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)  # times the attack's budget, then the bounds' budgets
    eot_draws: int = 10                          # forward passes of a randomized model (spread, the least EOT draws)
    max_eot_draws: int = 80                      # EOT's draws, sized from the gradient's variance, at most
    surface_examples: int = 8                    # examples whose loss is traced along two directions and PGD's steps
    surface_points: int = 11                     # points of each trace, from 0 to the budget
    consistency_examples: int = 64               # examples whose gradient is checked against the loss it predicts
    random_samples: int = 64                     # uniform points of the eps-ball per example (random sampling)
    decision_queries: int = 1000                 # the decision-based attack's (RayS's) decisions per example
    adaptive_steps: int = 100                    # the adaptive attacks' (BPDA / NES with APGD) iterations
    adaptive_restarts: int = 3                   # BPDA-APGD-CE's restarts
    nes_samples: int = 32                        # NES: model evaluations per gradient estimate (antithetic pairs)
    tolerance: float = 0.02                      # accuracy gap (fraction) below which two attacks are as strong
    significance: float = 0.05                   # level of the one-sided exact McNemar test
    max_zero_gradients: float = 0.05             # fraction of examples with an all-zero input gradient: fail above
    top_accuracy: float = 0.02                   # robust accuracy at the whole-range budget: fail above
    build: tuple[str, ...] | None = None         # the tables (or groups) whose rows' models every build audits
    form: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.form:  # made from its fields: its JSON form holds every setting
            object.__setattr__(self, "form", tuple(f.name for f in dataclasses.fields(self) if f.name != "form"))

    @classmethod
    def from_dict(cls, raw: Mapping) -> "AuditSpec":
        """The spec of the ``audit:`` block as written (its lists as tuples, frozen). ValueError for a key it does
        not know."""
        return cls(**{k: freeze(v) for k, v in cls._fields_of(raw, "the audit's settings").items()},
                   form=tuple(raw))

    def as_dict(self) -> dict:
        return {k: thaw(getattr(self, k)) for k in self.form}


@dataclass(frozen=True)
class Schedule(_Spec):
    """A piecewise-linear schedule through (epoch, value) breakpoints (tradeoff.methods.optim.piecewise_linear reads it)."""

    epochs: tuple[float, ...]
    values: tuple[float, ...]

    @classmethod
    def from_dict(cls, raw: Mapping) -> "Schedule":
        given = cls._fields_of(raw, "a schedule")
        return cls(epochs=tuple(given["epochs"]), values=tuple(given["values"]))


@dataclass(frozen=True)
class Optimizer(_Spec):
    """``optimizer:``: SGD (momentum, Nesterov) or Adam (betas), with weight decay; an unset field is the optimizer's
    own default (tradeoff.methods.optim.build_optimizer)."""

    _OMITTED: ClassVar[tuple[str, ...]] = ("momentum", "weight_decay", "nesterov", "betas")

    name: str
    momentum: float | None = None
    weight_decay: float | None = None
    nesterov: bool | None = None
    betas: tuple[float, float] | None = None

    @classmethod
    def from_dict(cls, raw: Mapping) -> "Optimizer":
        given = cls._fields_of(raw, "optimizer")
        if given.get("betas") is not None:
            given["betas"] = tuple(given["betas"])
        return cls(**given)


@dataclass(frozen=True)
class Augment(_Spec):
    """``augment:``: random crops after zero padding of ``crop_padding`` pixels, random horizontal flips."""

    crop_padding: int
    flip: bool

    @classmethod
    def from_dict(cls, raw: Mapping) -> "Augment":
        return cls(**cls._fields_of(raw, "augment"))


#: the splits a run's per-epoch selection can measure (``selection.split``): ``validation``, images held out of the
#: training split and never trained on (the default), or ``test``, the test split itself (the papers' and the
#: authors' practice: the images that then judge the model also chose its epoch)
SELECTION_SPLITS = ("validation", "test")
#: the modes that choose an epoch by measuring it (``last`` keeps the final epoch's model)
CHOOSING_MODES = ("best", "best_robust")


@dataclass(frozen=True)
class Selection(_Spec):
    """``selection:``: which epoch's model is the run's (``last``, ``best`` clean, ``best_robust``), measured on at
    most ``examples`` images of ``split`` under ``attack`` (resolved: a spec), every ``every`` epochs (best_robust).
    ``validation``: the images held out of the training split for it (the config's ``validation.<dataset>`` under
    ``split: validation``; 0 under ``split: test``, which trains on the whole training split)."""

    _OMITTED: ClassVar[tuple[str, ...]] = ("every",)

    mode: str
    min_clean: float
    examples: int
    attack: Any  # the resolved AttackSpec; its name before resolution
    every: float | None = None
    split: str = "validation"
    validation: int = 0

    @property
    def period(self) -> int:
        """The whole epochs between the robust measurements of ``best_robust`` (``every`` rounded half up, >= 1)."""
        return max(1, math.floor(float(self.every or 1) + 0.5))

    @property
    def chooses(self) -> bool:
        """Whether an epoch is chosen by a measurement (``best``, ``best_robust``), not simply the last one."""
        return self.mode in CHOOSING_MODES

    def measured(self, test_images: int) -> int:
        """How many images each epoch's measurement reads: at most ``examples`` of the validation split, or of the
        ``test_images`` that the run's test split holds (``split: test``)."""
        return min(int(self.examples), self.validation if self.split == "validation" else test_images)

    def record(self, test_images: int) -> dict:
        """What a model file and every metrics file of the run say about how its epoch was chosen:
        ``selection_split`` (``validation``, ``test``, or None where the last epoch is kept and no split chose it),
        ``selection_images`` (the images of that split measured per epoch; None with it) and ``validation_images``
        (the images held out of the training split, never trained on; 0 under ``split: test``)."""
        chose = self.split if self.chooses else None
        return {"selection_split": chose, "selection_images": self.measured(test_images) if chose else None,
                "validation_images": self.validation}

    @classmethod
    def from_dict(cls, raw: Mapping) -> "Selection":
        given = cls._fields_of(raw, "selection")
        given["attack"] = attack_spec(freeze(given.get("attack")))
        return cls(**given)


@dataclass(frozen=True)
class NamedParams(_Spec):
    """A declared thing's ``name`` and its parameters, written beside the name in one mapping (``{name: trades,
    lam: 6}``): a method's settings, a figure's analysis."""

    name: str
    params: FrozenDict = field(default_factory=FrozenDict)

    @classmethod
    def from_dict(cls, raw: Mapping):
        return cls(name=raw["name"], params=freeze({k: v for k, v in raw.items() if k != "name"}))

    def as_dict(self) -> dict:
        return {"name": self.name, **thaw(self.params)}

    def get(self, param: str, default: Any = None) -> Any:
        """One parameter's value (``default`` when the settings do not hold it: an optional one unset)."""
        return self.params.get(param, default)


@dataclass(frozen=True)
class MethodSpec(NamedParams):
    """``method:``: the method's name and its parameters, every declared one at its value (a method reads them as the
    fields of its ``parameters.settings``)."""


@dataclass(frozen=True)
class Backbone:
    """The pretrained backbone a run's architecture starts from: its file, or None while ``pretrained.<arch>`` is
    unset."""

    file: str | None


@dataclass(frozen=True, kw_only=True)
class RunSpec(_Spec):
    """A run's resolved settings: what its training job computes (two runs with the same settings share one job),
    plus the names of the paper's dataset and architecture it stands for at this scale (labels, not settings). The
    fields are declared in the key order the resolved settings had before they were typed, which ``as_dict`` (and so
    jobs.json) keeps."""

    _OMITTED: ClassVar[tuple[str, ...]] = ("pretrained",)

    seed: int
    lr_update: str                     # "epoch" or "step": when the schedules are read
    augment: Augment
    selection: Selection
    bn_running_stats: bool | str       # True, False, or "blocks"
    nonfinite: str                     # "stop" or "skip" a batch whose loss is not finite
    eps_warmup: float | None           # epochs over which the training attacks' budgets grow to their full value
    epochs: int
    batch_size: int
    optimizer: Optimizer
    lr: Schedule
    dataset: str
    arch: str
    method: MethodSpec
    paper_dataset: str
    paper_arch: str
    #: None for an architecture trained from scratch; one that starts from a pretrained backbone holds the backbone's
    #: file (``pretrained.<arch>``), which may be unset (None): the jobs that train it refuse then, the rest works
    pretrained: Backbone | None = None
    train_examples: int | None = None  # None: the whole training set
    test_examples: int | None = None   # None: the whole test set

    def trained_images(self, available: int) -> int:
        """How many of the ``available`` images of its dataset's training split the run trains on: those left after
        its validation split (``selection.validation``), at most ``train_examples``."""
        rest = available - self.selection.validation
        return min(rest, self.train_examples or rest)

    @property
    def backbone_file(self) -> str | None:
        """The pretrained backbone file the run starts from: None for a run trained from scratch, or while unset."""
        return self.pretrained.file if self.pretrained is not None else None

    @classmethod
    def from_dict(cls, raw: Mapping) -> "RunSpec":
        given = cls._fields_of(raw, "a run's settings")
        if "pretrained" in given:
            given["pretrained"] = Backbone(given["pretrained"])
        for name, part in (("augment", Augment), ("selection", Selection), ("optimizer", Optimizer),
                           ("lr", Schedule), ("method", MethodSpec)):
            if isinstance(given.get(name), Mapping):
                given[name] = part.from_dict(given[name])
        try:
            return cls(**given)
        except TypeError as exc:  # a missing setting
            raise ValueError(f"a run's settings: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class ExternalSpec(_Spec):
    """An external model's resolved settings (``external.<id>``, or ``tradeoff evaluate --checkpoint``): its file (and
    the SHA-256 pinned for it), architecture, dataset, the paper dataset its budgets are written for, the input
    normalisation inside the model ({mean, std} or None), the file's layout (tradeoff.models.zoo_names.FORMATS) and the scale's
    test examples."""

    checkpoint: str
    sha256: str | None
    arch: str
    dataset: str
    paper_dataset: str
    paper_arch: str
    normalize: Any  # FrozenDict {mean: (...), std: (...)} or None
    format: str
    test_examples: int | None = None

    @classmethod
    def from_dict(cls, raw: Mapping) -> "ExternalSpec":
        given = cls._fields_of(raw, "an external model's settings")
        given["normalize"] = freeze(given.get("normalize"))
        try:
            return cls(**given)
        except TypeError as exc:
            raise ValueError(f"an external model's settings: {exc}") from None



def model_spec(raw: Mapping) -> RunSpec | ExternalSpec:
    """A model's settings from their JSON form: a run's, or an external model's (it has a ``checkpoint``)."""
    return ExternalSpec.from_dict(raw) if "checkpoint" in raw else RunSpec.from_dict(raw)


def json_digest(obj: Any, **dumps: Any) -> str:
    """16 hex digits of the SHA-256 of ``obj`` as sorted JSON (``dumps``: json.dumps's other arguments, e.g.
    ``default``): the digest of a settings dict."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, **dumps).encode()).hexdigest()[:16]


#: an external model's keys that name its file, not what it computes (its SHA-256 stands for the file)
FILE_KEYS = ("checkpoint", "sha256")


def spec_digest(spec: RunSpec | ExternalSpec | dict) -> str:
    """What a run computes: two runs with the same digest train identically (the paper-scale names of their
    dataset and architecture are labels, not settings). Of an external model: how its file is read and evaluated
    (architecture, dataset, layout, normalisation, test examples), the file itself being its SHA-256. (A dict: the
    settings' JSON form, while they are resolved.)"""
    if isinstance(spec, _Spec):
        spec = spec.as_dict()
    settings = {k: v for k, v in spec.items() if not k.startswith("paper_") and k not in FILE_KEYS}
    return json_digest(settings)
