"""Reading the configuration: the YAML files (duplicate keys refused, syntax errors on one line), merged in order
as Snakemake merges its --configfile files, validated against workflow/schemas/config.schema.yaml. Also the words
of the format that every part of the package shares, and the one way an unknown name is reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import yaml

from tradeoff.attacks.declared.autoattack import COMPONENTS
from tradeoff.config.design import expand, merge
from tradeoff.core.errors import ConfigError, did_you_mean
from tradeoff.core.spec import CORRUPTIONS_TYPE  # noqa: F401  (the configuration's name for it: re-exported)

ROOT = Path(__file__).resolve().parents[3]


SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


REFERENCE_DIR = ROOT / "config" / "reference"  # the papers' numbers, one CSV per table (`reference:`)


DEFAULT_CONFIG = ROOT / "config" / "config.yaml"


# The attack types that run AutoAttack's code (tradeoff.attacks.autoattack: its COMPONENTS and the ensemble)
AUTOATTACK_FAMILY = (*COMPONENTS, "autoattack")


# An entry of `attacks:` of this type (tradeoff.core.spec.CORRUPTIONS_TYPE) is not an attack: it measures NROB on the
# corruption dataset it names (mapped by `corruption_map` at smaller scales; tradeoff.data.corruptions); a table column
# names it as any attack (CORRUPTIONS_TYPE, imported above).


# The evaluation job of every attack of a run (runtime.eval_unit: run): its files are metrics/<run>/all.json etc.
ALL_ATTACKS = "all"


# Table columns that are not an attack: the training time (minutes, from the run's curves) and the mean of the
# row's other columns except the clean one (CA-AT Table 2's "Mean").
PSEUDO_COLUMNS = ("train:minutes", "mean")


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """A YAML loader that rejects duplicate keys instead of silently keeping the last one. It parses with libyaml
    where PyYAML has it (every job reads the catalog: the pure-Python parser costs ~0.6 s of each job's start)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    mapping: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in mapping:
            raise ConfigError(
                f"duplicate key {key!r} at line {key_node.start_mark.line + 1} of {key_node.start_mark.name}: "
                "each run, attack and target id must appear once"
            )
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path: str | Path) -> dict:
    try:
        with open(path) as f:
            data = yaml.load(f, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:  # one line: the file, line and column, and what the parser expected
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        what = ": ".join(str(p) for p in (getattr(exc, "context", None), getattr(exc, "problem", None)) if p) \
            or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: YAML syntax error: {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def load_config(paths: Iterable[str | Path] | None = None) -> dict:
    """The files merged in order, the compact catalog (run design, target families) expanded run by run."""
    paths = list(paths or [DEFAULT_CONFIG])
    config: dict = {}
    for path in paths:
        config = merge(config, load_yaml(path))
    return expand(config)


def validate_schema(config: dict) -> None:
    import jsonschema

    schema = load_yaml(SCHEMA)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        found = [f"{_where(e) or '(top level)'}: {_explain(e)}" for e in errors[:10]]
        more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
        raise ConfigError("invalid configuration: " + "; ".join(found) + more)  # one line


def _where(error) -> str:
    """The key an error is about: for one unknown key, that key's full path (``runs.<id>.epoch``)."""
    where = _key(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        if len(extra) == 1:
            return f"{where}.{extra[0]}" if where else str(extra[0])
    return where


def _guess(value: Any, allowed: Iterable[Any]) -> str:
    """``; did you mean 'x'?`` with the closest of ``allowed`` (difflib), or nothing."""
    guess = did_you_mean(value, allowed, n=2)
    return f"; {guess}" if guess else ""


def _key(path: Iterable[Any]) -> str:
    return ".".join(str(p) for p in path)


def _explain(error) -> str:
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        return (f"unknown key(s) {extra}; allowed: {allowed}" + _guess(extra[0], allowed)) if allowed else error.message
    if error.validator == "enum":
        return f"{error.instance!r} is not allowed; allowed: {error.validator_value}" + \
            _guess(error.instance, error.validator_value)
    if error.validator in ("oneOf", "anyOf") and "description" in error.schema:
        return f"{error.instance!r} is not {error.schema['description']}"
    return error.message
