"""A target's resolved settings (:class:`TargetSpec`, its rows :class:`Row` and its analysis :class:`Analysis`), and
the kinds a target names, declared: every figure kind (a figure's ``plot``) and every analysis (a figure's
``analysis: {name: ...}``), with what each needs of a target and the check of it that runs when the configuration is
resolved. Each raises :class:`~tradeoff.core.errors.ConfigError` naming the key.

Only declarations and checks: no drawing, no PyTorch, nothing of the configuration (which calls these checks, and
answers their questions about attacks through :class:`Attacks`). A figure kind is declared once, in :data:`PLOTS`; the
report's code that draws it attaches itself to that declaration (``@figure_kind(name)``, tradeoff.report.kinds, sets
:attr:`FigureKind.drawing`; no second registry of kinds). What computes an analysis registers with ``@register(name)``
(tradeoff.analysis.base); each refuses a name not declared here, and a test ties the lists together."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tradeoff.core.errors import ConfigError
from tradeoff.core.registry import Registry
from tradeoff.core.spec import AttackSpec, FrozenDict, NamedParams, _Spec, freeze, thaw

# ----------------------------------------------------------------------------------------------- target specs

@dataclass(frozen=True)
class Row(_Spec):
    """A row of a table (a point or a line of a figure): its ``key``, the model that fills it (``run``: a run id, or
    an external model's id, which ``external`` then names too), and how it is shown (``label``; ``x``, its value on
    a figure's x axis; ``series``, the line of a figure it belongs to)."""

    _OMITTED: ClassVar[tuple[str, ...]] = ("external", "label", "x", "series")

    key: str
    run: str
    external: str | None = None
    label: str | None = None
    x: float | None = None
    series: str | None = None

    @classmethod
    def from_dict(cls, raw: Mapping) -> "Row":
        return cls(**cls._fields_of(raw, "a target's row"))


@dataclass(frozen=True)
class Analysis(NamedParams):
    """A figure's ``analysis:``: the declared analysis it reads (``name``) and its parameters, as written (the
    analysis reads its own; its declaration's check ran when the configuration was resolved)."""


@dataclass(frozen=True, kw_only=True)
class TargetSpec(_Spec):
    """A target of the configuration (``targets.<name>``) as the resolver made it: a ``table`` (rows, columns and
    the paper's numbers it is compared with), a ``figure`` (rows drawn as its ``plot`` kind, or an analysis) or a
    ``group`` of targets (``targets``). Every field is the key of that name (workflow/schemas/config.schema.yaml);
    one that is not written is None, or empty for ``rows``, ``columns``, ``targets`` and ``column_labels``.
    ``as_dict()`` is the target as written (the settings digests, the catalog's cache)."""

    kind: str                                   # table, figure or group
    title: str | None = None
    note: str | None = None                     # what this scale left out, printed under it
    paper_note: tuple[str, ...] = ()            # what the paper's own numbers are (a table)
    reference: str | None = None                # the paper's numbers: <reference_dir>/<reference>.csv (a table)
    compare: str | tuple[str, ...] | None = None  # the row(s) of the paper's method, compared with the others
    protocol: str | None = None                 # the authors' protocol (a name under ``protocols:``) (a table)
    plot: str | None = None                     # the figure kind (PLOTS)
    x_label: str | None = None
    column_labels: FrozenDict = field(default_factory=FrozenDict)  # column -> its human label
    curve_columns: tuple[str, ...] = ()         # the training curves a `curves` figure draws
    analysis: Analysis | None = None            # the analysis a figure reads
    targets: tuple[str, ...] = ()               # a group's members
    rows: tuple[Row, ...] = ()
    columns: FrozenDict = field(default_factory=FrozenDict)        # column -> the attack (evaluation) it shows
    #: the keys written (an empty one too: a figure of an analysis may write ``rows: []``), which as_dict keeps
    written: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    #: the keys a target may have (a field of its spec each)
    KEYS: ClassVar[tuple[str, ...]] = ()

    @property
    def compared(self) -> list[str]:
        """The row keys of ``compare`` (one, or a list), none when unset."""
        return [self.compare] if isinstance(self.compare, str) else list(self.compare or ())

    def row(self, key: str) -> Row:
        """The row of this key."""
        return next(r for r in self.rows if r.key == key)

    @classmethod
    def from_dict(cls, raw: Mapping) -> "TargetSpec":
        if "written" in raw:
            raise ValueError("a target: unknown setting(s) ['written']")
        given = cls._fields_of(raw, "a target")
        if "rows" in given:
            given["rows"] = tuple(r if isinstance(r, Row) else Row.from_dict(r) for r in given["rows"] or ())
        if isinstance(given.get("analysis"), Mapping):
            given["analysis"] = Analysis.from_dict(given["analysis"])
        for name in ("paper_note", "curve_columns", "targets"):
            if name in given:
                given[name] = tuple(given[name] or ())
        if isinstance(given.get("compare"), list):
            given["compare"] = tuple(given["compare"])
        for name in ("columns", "column_labels"):
            if name in given:
                given[name] = freeze(given[name] or {})
        try:
            return cls(**given, written=frozenset(given))
        except TypeError as exc:  # no kind
            raise ValueError(f"a target: {exc}") from None

    def as_dict(self) -> dict:
        """The target as written: the fields it was given and those set since (not an empty one), lists and dicts."""
        return {f.name: thaw(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "written"
                and (f.name in self.written or getattr(self, f.name) not in (None, (), {}))}


@dataclass(frozen=True)
class Attacks:
    """The configuration's attacks as a target's check asks about them; tradeoff.config, which owns budgets and
    attack types, builds it."""
    specs: Mapping[str, AttackSpec]                 # name -> its entry of ``attacks:``, as written
    split: Callable[[str], tuple[str, str | None]]  # 'pgd@16_255' -> ('pgd', '16_255')
    sweep: Callable[[str], list[str] | None]        # an attack's budget labels when its eps is a list, else None
    corruptions: str                                # the type of an entry that measures corrupted sets

    def __contains__(self, name: Any) -> bool:
        return name in self.specs

    def base(self, name: Any) -> str:
        return self.split(str(name))[0]

    def type(self, name: Any) -> Any:
        return self.specs[name].type if name in self.specs else None


@dataclass(frozen=True)
class FigureKind:
    name: str
    needs: tuple[str, ...] = ("columns",)  # fields besides rows and plot (columns: none when it reads an analysis)
    analysis: str | None = None            # the analysis it draws, which its target must name ...
    example: str = ""                      # ... with these parameters, in the message that asks for it
    sweeps: bool = False                   # a column may name a budget sweep whole (drawn over its budgets)
    trained: str | None = None             # what it draws of its rows that only a trained run has
    check: Callable | None = None          # check(name, target, key, attacks): raises ConfigError naming the key
    #: how the report draws it (tradeoff.report.kinds.Kind): attached once by the report's drawing module, None while
    #: the report is not loaded (the configuration never loads it)
    drawing: Any = field(default=None, compare=False, repr=False)

    def draw_with(self, drawing: Any) -> None:
        """Attach the report's drawing of this kind (once: a second module drawing it is an error)."""
        if self.drawing is not None:
            raise ValueError(f"figure kind {self.name!r} drawn twice")
        object.__setattr__(self, "drawing", drawing)  # the declaration stays frozen for everything it declares

    def fields(self, target: TargetSpec, key: str) -> tuple[str, ...]:
        """The fields a target of this kind needs besides rows and plot; refuses one that names not its analysis."""
        if self.analysis and (target.analysis.name if target.analysis else None) != self.analysis:
            raise ConfigError(f"{key}.analysis: a `{self.name}` figure reads a {self.analysis} analysis; add "
                              f"`analysis: {{name: {self.analysis}, {self.example}}}`")
        return tuple(f for f in self.needs if f != "columns" or target.analysis is None)


@dataclass(frozen=True)
class AnalysisKind:
    name: str
    check: Callable | None = None  # check(target, key, attacks): its parameters; raises ConfigError naming the key


PLOTS = Registry("figure kind")
ANALYSIS_KINDS = Registry("analysis")


TargetSpec.KEYS = tuple(f.name for f in dataclasses.fields(TargetSpec) if f.name != "written")


# ------------------------------------------------------------------------------------------------- figure kinds

def check_front(name: str, target: TargetSpec, key: str, attacks: Attacks) -> None:
    columns = list(target.columns)
    if len(columns) < 2:
        raise ConfigError(f"{key}.columns: a `front` figure needs at least 2 columns, the clean one (x) first "
                          f"and then one robust column per panel; got {columns}")
    first = attacks.base(target.columns[columns[0]])
    if first in attacks and attacks.type(first) != "clean":  # unknown attacks: reported with the columns
        raise ConfigError(f"{key}.columns.{columns[0]}: the first column of a `front` figure is its x axis, the "
                          f"clean accuracy: an attack of type clean; got {target.columns[columns[0]]!r}")


def check_lines(name: str, target: TargetSpec, key: str, attacks: Attacks) -> None:
    """A `lines` figure draws a metric over a swept parameter: the rows' `x` values, or (every column a budget sweep
    named without a budget, or a clean attack drawn at budget 0) the budgets of the columns' sweeps."""
    sweeps = [a for a in target.columns.values() if a in attacks and attacks.sweep(a) is not None]
    if sweeps:
        others = [a for a in target.columns.values() if a not in sweeps and attacks.type(a) != "clean"]
        if others:
            raise ConfigError(f"{key}.columns: a `lines` figure over attack budgets takes budget sweeps (and a clean "
                              f"column, drawn at budget 0); got {others}")
    elif any(row.x is None for row in target.rows):
        raise ConfigError(f"{key}.rows: a `lines` figure needs an `x` value on every row (or budget-sweep columns)")


def check_per_class(name: str, target: TargetSpec, key: str, attacks: Attacks) -> None:
    for column, attack in target.columns.items():
        if attacks.type(attacks.base(attack)) == attacks.corruptions:
            raise ConfigError(f"{key}.columns.{column}: a `per_class` figure draws one attack's per-example results; "
                              f"{attack!r} measures many corrupted sets")


for _kind in (FigureKind("scatter"), FigureKind("bars"),
              FigureKind("lines", sweeps=True, check=check_lines),
              FigureKind("per_class", check=check_per_class),
              FigureKind("curves", needs=("curve_columns",), trained="draws the training curves of"),
              FigureKind("front", check=check_front),
              FigureKind("grid", analysis="disagreement_grid", example="right: ..., wrong: ..., attack: ..."),
              FigureKind("tsne", analysis="learner_tsne", example="attack: pgd20, examples: ..."),
              FigureKind("caat_synthetic")):
    PLOTS.register(_kind)


# ----------------------------------------------------------------------------------------------------- analyses

def check_analysis(target: TargetSpec, key: str, attacks: Attacks) -> None:
    """A target's ``analysis``: only a figure has one, it names a declared analysis, whose check its parameters
    pass, and the attack it analyses (if any) is an attack."""
    if target.kind != "figure":
        raise ConfigError(f"{key}.analysis: only a figure has an analysis")
    name = target.analysis.name
    if name not in ANALYSIS_KINDS:
        raise ConfigError(f"{key}.analysis.name: unknown analysis {name!r}; allowed: {sorted(ANALYSIS_KINDS)}")
    if ANALYSIS_KINDS[name].check is not None:
        ANALYSIS_KINDS[name].check(target, key, attacks)
    analysed = attacks.base(target.analysis.params.get("attack", ""))
    if attacks.type(analysed) == attacks.corruptions:
        raise ConfigError(f"{key}.analysis.attack: {analysed!r} measures accuracy on corrupted images, it is not "
                          "an attack")


def row_keys(value: Any) -> list[str]:
    """A disagreement grid's ``right`` or ``wrong``: one row key, or a list of them."""
    return [value] if isinstance(value, str) else list(value or [])


def check_disagreement_grid(target: TargetSpec, key: str, attacks: Attacks) -> None:
    params = target.analysis.as_dict()
    rows = [r.key for r in target.rows]
    allowed = {"name", "right", "wrong", "any_right", "any_wrong", "attack", "count", "seed", "show"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ConfigError(f"{key}.analysis: unknown parameter(s) {unknown} for disagreement_grid; "
                          f"allowed: {sorted(allowed)}")
    for name in ("right", "wrong"):
        value = params.get(name)
        keys = row_keys(value)
        if not keys or not all(isinstance(k, str) for k in keys):
            raise ConfigError(f"{key}.analysis.{name}: expected a row key or a list of row keys; allowed: {rows}")
        for k in keys:
            if k not in rows:
                raise ConfigError(f"{key}.analysis.{name}: unknown row key {k!r}; allowed: {rows}")
    both = set(row_keys(params["right"])) & set(row_keys(params["wrong"]))
    if both:
        raise ConfigError(f"{key}.analysis: row key(s) {sorted(both)} cannot be both `right` and `wrong`")
    for flag in ("any_right", "any_wrong"):
        if flag in params and not isinstance(params[flag], bool):
            raise ConfigError(f"{key}.analysis.{flag}: expected true or false, got {params[flag]!r}")
    if "show" in params and params["show"] not in rows:
        raise ConfigError(f"{key}.analysis.show: unknown row key {params['show']!r}; allowed: {rows}")
    attack = params.get("attack")
    if attack is None or attacks.base(attack) not in attacks:
        raise ConfigError(f"{key}.analysis.attack: unknown attack {attack!r}; allowed: {sorted(attacks.specs)}")
    for name, low in (("count", 1), ("seed", 0)):
        value = params.get(name, low)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ConfigError(f"{key}.analysis.{name}: expected an integer >= {low}, got {value!r}")


#: learner_tsne's parameters and their defaults (tradeoff.analysis.learner_tsne), and the values of ``embed``
TSNE_DEFAULTS = {"attack": "pgd20", "examples": 500, "perplexity": 30.0, "seed": 0, "embed": "images"}
TSNE_EMBED = ("images", "perturbations")


def check_learner_tsne(target: TargetSpec, key: str, attacks: Attacks) -> None:
    params = target.analysis.as_dict()
    unknown = sorted(set(params) - set(TSNE_DEFAULTS) - {"name"})
    if unknown:
        raise ConfigError(f"{key}.analysis: unknown parameter(s) {unknown} for learner_tsne; "
                          f"allowed: {sorted(TSNE_DEFAULTS)}")
    attack = params.get("attack", TSNE_DEFAULTS["attack"])
    if attacks.base(attack) not in attacks:
        raise ConfigError(f"{key}.analysis.attack: unknown attack {attack!r}; allowed: {sorted(attacks.specs)}")
    for name, low in (("examples", 2), ("seed", 0)):
        value = params.get(name, TSNE_DEFAULTS[name])
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ConfigError(f"{key}.analysis.{name}: expected an integer >= {low}, got {value!r}")
    perplexity = params.get("perplexity", TSNE_DEFAULTS["perplexity"])
    if isinstance(perplexity, bool) or not isinstance(perplexity, (int, float)) or perplexity <= 0:
        raise ConfigError(f"{key}.analysis.perplexity: expected a number > 0, got {perplexity!r}")
    if params.get("embed", TSNE_DEFAULTS["embed"]) not in TSNE_EMBED:
        raise ConfigError(f"{key}.analysis.embed: {params['embed']!r} is not allowed; allowed: {list(TSNE_EMBED)}")


for _analysis in (AnalysisKind("caat_synthetic"),
                  AnalysisKind("disagreement_grid", check=check_disagreement_grid),
                  AnalysisKind("learner_tsne", check=check_learner_tsne)):
    ANALYSIS_KINDS.register(_analysis)
