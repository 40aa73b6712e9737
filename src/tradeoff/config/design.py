"""The catalog's compact form: the run design, expanded into the run-by-run ``runs:`` mapping.

The papers vary their runs as grids: methods (and their settings) across datasets and architectures, a parameter
swept, a few seeds. ``design:`` declares them so, in blocks (config/README.md, "Runs"):

    design:
      generalist-figure3:                     # a block: its name only names it in error messages
        families:                             # the run id's first part -> run settings (preset, dataset, arch)
          cifar10-resnet18: {preset: generalist-resnet18, dataset: cifar10, arch: resnet18}
        settings: {seeds: [0, 1]}             # run settings that every run of the block shares (optional)
        base: {name: generalist, c: 5}        # the method that a variant naming no other method changes (optional)
        variants:                             # the run id's rest -> method settings
          nt: {name: nt}                      # names another method: stands alone
          generalist-c{c}: {c: [1, 2, 3]}     # the base with c = 1, 2, 3: ...-generalist-c1, -c2, -c3
        runs:                                 # changes of single runs of the block, merged last (optional)
          cifar10-resnet18-nt: {epochs: 100}

Every family is crossed with every variant, families outermost, both in the order written. Run
``<family>-<variant>`` is the block's ``settings``, merged (recursively) with the family's settings and with
``method:`` the variant's settings, and then with the block's ``runs`` entry of that id. A variant's settings
update ``base`` (key by key: a key given replaces the base's) unless they name another method (``name``).
``families`` and ``variants`` may be lists of such mappings, taken in order (e.g. YAML aliases of shared tables).
``{p}`` in a variant id sweeps the list given for ``p`` (several placeholders: every combination, the first
slowest); the id shows each value with ``.`` as ``_`` (0.25 -> 0_25, 1.0 -> 1).

A designed run without ``seed`` or ``seeds`` has seed 0. Plain ``runs:`` entries are runs as written (an overlay's
one-off runs), after the design's; one with the id of a designed run changes that run (merged over it, as the files
are merged). In a target's rows, ``{family}`` in a run id stands for the target's ``family`` (``family:
cifar10-resnet18`` and ``run: "{family}-nt"`` read ``cifar10-resnet18-nt``), so that tables and figures of
different families share their rows (a YAML alias); rows with whole run ids are read as they are.

:func:`expand` is pure logic on dicts (tradeoff.config.load_config calls it right after merging the files); what it
returns is the config as the run-by-run catalog wrote it, which the schema and the registries then validate.
"""

from __future__ import annotations

import copy
import itertools
import re
from typing import Any

from tradeoff.core.errors import ConfigError, unknown

BLOCK_KEYS = ("settings", "families", "base", "variants", "runs")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _error(message: str) -> Exception:
    return ConfigError(message)


def merge(base: dict, overlay: dict) -> dict:
    """Recursive dict update on copies, as Snakemake merges several --configfile files (and the design merges a
    family's settings, its variant's and a run's own)."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def id_part(value: Any, key: str) -> str:
    """How a swept value shows in a run id: numbers as written by ``%g`` with ``.`` as ``_`` (0.25 -> 0_25,
    1.0 -> 1, 12 -> 12), names as they are."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _error(f"{key}: a swept value must be a number or a name, got {value!r}")
    if isinstance(value, str):
        return value
    return (str(value) if isinstance(value, int) else format(value, "g")).replace(".", "_")


def _mapping(value: Any, key: str, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _error(f"{key}: expected {what}, got {type(value).__name__} {value!r}")
    return value


def _table(value: Any, key: str, what: str) -> list[tuple[str, str, dict]]:
    """A block's families or variants: a mapping id -> settings, or a list of such mappings taken in order.
    Returns (id, key of the entry, settings)."""
    tables = value if isinstance(value, list) else [value]
    if not tables or value in ({}, None):
        raise _error(f"{key}: expected a non-empty mapping of {what} (id -> settings), or a list of such mappings")
    out: list[tuple[str, str, dict]] = []
    for i, table in enumerate(tables):
        where = f"{key}[{i}]" if isinstance(value, list) else key
        table = _mapping(table, where, f"a mapping of {what} (id -> settings)")
        for name, settings in table.items():
            if not isinstance(name, str) or not name:
                raise _error(f"{where}: an id must be a non-empty name, got {name!r}")
            out.append((name, f"{where}.{name}", _mapping(settings, f"{where}.{name}", "a mapping of settings")))
    return out


def _sweep(name: str, key: str, settings: dict) -> list[tuple[str, dict]]:
    """A variant id with ``{p}`` placeholders: one (id, settings) per combination of the lists given for them."""
    params = list(dict.fromkeys(_PLACEHOLDER.findall(name)))
    if not params:
        if "{" in name or "}" in name:
            raise _error(f"{key}: a placeholder is written {{parameter}}, e.g. gamma{{gamma}}")
        return [(name, settings)]
    values = []
    for p in params:
        given = settings.get(p)
        if not isinstance(given, list) or not given:
            raise _error(f"{key}.{p}: the id sweeps {{{p}}}: give a non-empty list of its values, got {given!r}")
        values.append(given)
    out = []
    for combination in itertools.product(*values):
        run_name = name
        for p, v in zip(params, combination):
            run_name = run_name.replace("{" + p + "}", id_part(v, f"{key}.{p}"))
        out.append((run_name, {**settings, **dict(zip(params, combination))}))
    return out


def _method(settings: dict, base: dict | None, key: str) -> dict:
    """A variant's method: its settings over the block's base, unless it names another method."""
    if base is not None and settings.get("name", base.get("name")) == base.get("name"):
        return {**base, **settings}
    if "name" not in settings:
        raise _error(f"{key}: no method: give `name` (a registered method), or a `base` to the block")
    return dict(settings)


def expand_block(name: str, block: Any) -> dict[str, dict]:
    """The runs of one design block, id -> run settings, in order (families outermost)."""
    key = f"design.{name}"
    block = _mapping(block, key, "a mapping (settings, families, base, variants, runs)")
    extra = [k for k in block if k not in BLOCK_KEYS]
    if extra:
        raise _error(f"{key}: unknown key(s) {sorted(map(str, extra))}; allowed: {sorted(BLOCK_KEYS)}")
    for needed in ("families", "variants"):
        if needed not in block:
            raise _error(f"{key}: a block needs `{needed}`")
    settings = _mapping(block.get("settings"), f"{key}.settings", "a mapping of run settings")
    if "method" in settings:
        raise _error(f"{key}.settings.method: a block's method comes from `variants` (and `base`)")
    base = block.get("base")
    if base is not None:
        base = _mapping(base, f"{key}.base", "a mapping of method settings")
        if "name" not in base:
            raise _error(f"{key}.base: give the method's `name`")
    families = _table(block["families"], f"{key}.families", "families")
    for family, where, fam in families:
        if "method" in fam:
            raise _error(f"{where}.method: a family holds run settings; the method comes from `variants`")
    variants = [(vid, where, method)
                for vname, where, given in _table(block["variants"], f"{key}.variants", "variants")
                for vid, method in _sweep(vname, where, _method(given, base, where))]
    runs: dict[str, dict] = {}
    made: dict[str, str] = {}
    for family, fam_key, fam in families:
        for variant, var_key, method in variants:
            rid = f"{family}-{variant}"
            if rid in runs:
                raise _error(f"{var_key}: run id {rid!r} is made twice in {key} (also by {made[rid]})")
            runs[rid] = merge(merge(settings, fam), {"method": method})
            made[rid] = f"{fam_key} x {var_key}"
    changes = _mapping(block.get("runs"), f"{key}.runs", "a mapping of run id -> settings")
    for rid, change in changes.items():
        if rid not in runs:
            raise _error(f"{key}.runs.{rid}: " + unknown("run of this block", rid, runs))
        runs[rid] = merge(runs[rid], _mapping(change, f"{key}.runs.{rid}", "a mapping of run settings"))
    return runs


def expand_design(design: Any) -> dict[str, dict]:
    """Every run of ``design:``, id -> run settings, blocks in order."""
    design = _mapping(design, "design", "a mapping of blocks (name -> settings, families, base, variants, runs)")
    runs: dict[str, dict] = {}
    owner: dict[str, str] = {}
    for name, block in design.items():
        for rid, run in expand_block(str(name), block).items():
            if rid in runs:
                raise _error(f"design.{name}: run id {rid!r} is also made by design.{owner[rid]}")
            runs[rid] = run
            owner[rid] = str(name)
    return runs


FAMILY = "{family}"


def _external_row(row: Any, key: str) -> Any:
    """A row that names an external model (``external: <id>``) with ``run`` set to that id too: every reader of a
    row reads ``run``, the model that fills it; ``external`` says what kind of model it is."""
    if not isinstance(row, dict) or "external" not in row:
        return row
    if "run" in row and row["run"] != row["external"]:
        raise _error(f"{key}: give `run` (a run of the catalog) or `external` (a model of the `external:` section), "
                     f"not both")
    return {**row, "run": row["external"]}


def expand_targets(targets: Any) -> Any:
    """Targets with ``{family}`` in their rows' run ids replaced by the target's ``family`` (which is removed), and
    rows naming an external model given its id as ``run`` too; without either, the targets themselves."""
    if not isinstance(targets, dict):
        return targets
    out, changed = {}, False
    for name, target in targets.items():
        rows = target.get("rows") if isinstance(target, dict) else None
        rows = rows if isinstance(rows, list) else []
        if any(isinstance(row, dict) and "external" in row and row.get("run") != row["external"] for row in rows):
            changed = True
            rows = [_external_row(row, f"targets.{name}.rows[{i}]") for i, row in enumerate(rows)]
            target = {**target, "rows": rows}
        uses = [i for i, row in enumerate(rows) if isinstance(row, dict) and FAMILY in str(row.get("run", ""))]
        if not isinstance(target, dict) or ("family" not in target and not uses):
            out[name] = target
            continue
        changed = True
        family = target.get("family")
        if family is not None and (not isinstance(family, str) or not family or FAMILY in family):
            raise _error(f"targets.{name}.family: expected the run-id prefix that {FAMILY} stands for in the rows' "
                         f"runs (e.g. cifar10-resnet18), got {family!r}")
        target = {k: v for k, v in target.items() if k != "family"}
        if uses:
            if family is None:
                raise _error(f"targets.{name}.rows[{uses[0]}].run: {rows[uses[0]]['run']!r} names {FAMILY}, but the "
                             "target has no `family` (the run-id prefix it stands for)")
            target["rows"] = [{**row, "run": str(row["run"]).replace(FAMILY, family)} if i in uses else row
                              for i, row in enumerate(rows)]
        out[name] = target
    return out if changed else targets


def _unshared(value: Any) -> Any:
    """A copy in which no mapping or list appears twice: YAML aliases share objects, which a change of one target's
    columns (a test, a notebook) would change in every target that names them, and which yaml.dump writes as
    aliases (params.yaml)."""
    if isinstance(value, dict):
        return {k: _unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshared(v) for v in value]
    return value


def expand(config: dict) -> dict:
    """The config with its run design expanded into ``runs`` (the design's runs first, changed by plain entries of the
    same id, then the other plain runs) and ``{family}`` in its targets' rows replaced: the run-by-run catalog, as a new dict without shared parts (the given one is not
    changed)."""
    out = {}
    for k, v in config.items():
        if k != "design":
            out[k] = v
        elif "runs" not in config:
            out["runs"] = {}  # the design's runs go where the design is
    if "targets" in config:
        out["targets"] = expand_targets(config["targets"])
    if "design" in config:
        runs = expand_design(config["design"])
        plain = config.get("runs") or {}
        if not isinstance(plain, dict):
            raise _error(f"runs: expected a mapping of run id -> settings, got {type(plain).__name__}")
        designed = list(runs)
        for rid, run in plain.items():  # an overlay's change of a designed run, as files merge; or a run of its own
            runs[rid] = merge(runs[rid], run) if rid in runs and isinstance(run, dict) else run
        for rid in designed:
            if "seed" not in runs[rid] and "seeds" not in runs[rid]:
                runs[rid]["seed"] = 0  # as the run-by-run catalog wrote every run
        out["runs"] = runs
    out.setdefault("runs", {})  # none at all: the schema says that runs must not be empty
    return _unshared(out)
