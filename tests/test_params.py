"""Typed parameters (tradeoff.core.params): every declared choice of every registered method and attack, and of the runtime
and a run's selection, is accepted by the configuration's check (``tradeoff check-config`` resolves the config with
:func:`tradeoff.config.resolve`), and a misspelling of it, a value of the wrong kind or an unknown key is refused
with one line naming the key and the closest allowed values."""

from __future__ import annotations

import copy
import math

import pytest

from tradeoff import config as cfg
from tradeoff.attacks import ATTACKS
from tradeoff.core.params import (
    ATTACK,
    FLAG,
    INTEGER,
    LIST,
    MAPPING,
    NUMBER,
    SCHEDULE,
    STEP,
    TEXT,
    Param,
    Params,
    closest,
)
from tradeoff.core.settings import RUNTIME
from tradeoff.methods import METHODS

PAPER = [cfg.ROOT / "config" / "config.yaml"]
PROBE = "probe"


@pytest.fixture(scope="module")
def small() -> dict:
    """The shipped config with one run (the NT run's settings, its method replaced by each test) and no targets:
    resolving it checks exactly what check-config checks of a run, an attack and the runtime, in milliseconds."""
    config = cfg.load_config(PAPER)
    config["runs"] = {PROBE: copy.deepcopy(config["runs"]["cifar10-resnet18-nt"])}
    config["targets"] = {}
    config["audit"]["build"] = []  # the audited tables are gone with the targets
    return config


def _valid(p: Param):
    """A value that the parameter accepts."""
    if p.default is not None and not (isinstance(p.default, float) and not math.isfinite(p.default)):
        return copy.deepcopy(p.default)  # (an infinite default cannot be written in a config: a finite number)
    if p.type == MAPPING:
        return {f.name: _valid(f) for f in p.fields if f.required}
    if p.type == LIST:
        return [p.choices[0]] if p.choices else [_valid(p.but(type=p.item or NUMBER, default=None))]
    low = p.range.low if p.range is not None and math.isfinite(p.range.low) else 0
    return {NUMBER: max(low, 1), INTEGER: max(int(low), 1), FLAG: False, TEXT: p.choices[0] if p.choices else "x",
            ATTACK: "pgd20", STEP: 0.01, SCHEDULE: {"epochs": [0], "values": [max(low, 0)]}}[p.type]


def _wrong(p: Param):
    """A value of another kind than the parameter's."""
    return {NUMBER: "one", INTEGER: "one", FLAG: "yes", TEXT: 3, SCHEDULE: 0.5, LIST: "one", MAPPING: 5,
            ATTACK: 5, STEP: True}[p.type]


def _choices(params: Params):
    """(parameter, key below it or None, the kind of place, allowed value) of every declared choice, mapping fields'
    included."""
    for p in params:
        for value in p.choices:
            yield p, None, value
        for f in p.fields:
            for value in f.choices:
                yield p, f, value


def _set(p: Param, field: Param | None, value):
    """The parameter's value with ``value`` chosen (in the field, or as the list's one entry)."""
    chosen = [value] if (field or p).type == LIST else value
    if field is None:
        return chosen
    return {**_valid(p), field.name: chosen}


def _misspelt(value: str) -> str:
    return value + value[-1]


def _resolve_method(config: dict, method: dict):
    config = copy.deepcopy(config)
    config["runs"][PROBE]["method"] = method
    return cfg.resolve(config)


def _resolve_attack(config: dict, attack: dict):
    config = copy.deepcopy(config)
    config["attacks"][PROBE] = attack
    return cfg.resolve(config)


METHOD_CHOICES = [(m, p.name, f.name if f else None, v) for m in sorted(METHODS)
                  for p, f, v in _choices(METHODS[m].parameters)]
ATTACK_CHOICES = [(a, p.name, f.name if f else None, v) for a in sorted(ATTACKS)
                  for p, f, v in _choices(ATTACKS[a].parameters)]


def test_the_walk_covers_the_choices_the_issue_names():
    assert {("pgd_at", "attack_mode", None, "eval"), ("generalist", "communication", None, "epoch"),
            ("generalist", "nt_lr_schedule", None, "scaled"), ("fat", "random_start", None, "uniform"),
            ("generalist", "nt_optimizer", "name", "adam"), ("generalist", "track_learners", "attacked", "at")} \
        <= set(METHOD_CHOICES)
    assert {("pgd", "loss", None, "cw"), ("pgd", "start", None, "normal"), ("autoattack", "components", None,
                                                                              "square")} <= set(ATTACK_CHOICES)


@pytest.mark.parametrize("method, name, field, value", METHOD_CHOICES)
def test_every_declared_choice_of_every_method_is_accepted_and_its_misspelling_refused(small, method, name, field,
                                                                                       value):
    p = METHODS[method].parameters[name]
    f = p.fields[[x.name for x in p.fields].index(field)] if field else None
    params = _resolve_method(small, {"name": method, name: _set(p, f, value)}).runs[PROBE].method.params
    got = params[name] if f is None else params[name][f.name]
    assert got == ((value,) if (f or p).type == LIST else value)  # resolved settings are frozen: lists are tuples
    key = f"runs.{PROBE}.method.{name}" + (f".{field}" if field else "") + ("[0]" if (f or p).type == LIST else "")
    with pytest.raises(cfg.ConfigError) as refused:
        _resolve_method(small, {"name": method, name: _set(p, f, _misspelt(value))})
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{key}: ") and f"did you mean {value!r}?" in message, message


@pytest.mark.parametrize("attack, name, field, value", ATTACK_CHOICES)
def test_every_declared_choice_of_every_attack_is_accepted_and_its_misspelling_refused(small, attack, name, field,
                                                                                       value):
    p = ATTACKS[attack].parameters[name]
    _resolve_attack(small, {"type": attack, name: _set(p, None, value)})
    key = f"attacks.{PROBE}.{name}" + ("[0]" if p.type == LIST else "")
    with pytest.raises(cfg.ConfigError) as refused:
        _resolve_attack(small, {"type": attack, name: _set(p, None, _misspelt(value))})
    message = str(refused.value)
    assert "\n" not in message and f"{key}: " in message and repr(value) in message.partition("did you mean")[2], \
        message


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_every_attack_refuses_a_misspelt_norm_a_wrong_kind_and_an_unknown_key(small, attack):
    cls = ATTACKS[attack]
    for norm in cls.norms:
        _resolve_attack(small, {"type": attack, "norm": norm})
    for norm in {"linf", "l2"} - set(cls.norms):  # an attack of one norm: the other is refused
        with pytest.raises(cfg.ConfigError, match=rf"attacks\.{PROBE}\.norm: must be one of"):
            _resolve_attack(small, {"type": attack, "norm": norm})
    for p in cls.parameters:
        with pytest.raises(cfg.ConfigError, match=rf"attacks\.{PROBE}\.{p.name}(\[0\])?: "):
            _resolve_attack(small, {"type": attack, p.name: _wrong(p)})
        if p.type == LIST:
            continue
        _resolve_attack(small, {"type": attack, p.name: _valid(p)})
    first = cls.parameters.names[0]
    with pytest.raises(cfg.ConfigError) as refused:
        _resolve_attack(small, {"type": attack, first + "x": 1})
    assert str(refused.value).startswith(f"attacks.{PROBE}.{first}x: unknown parameter of attack type {attack!r}; "
                                         f"did you mean {first!r}")


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_refuses_a_wrong_kind_and_an_unknown_key(small, method):
    declared = METHODS[method].parameters
    for p in declared:
        _resolve_method(small, {"name": method, p.name: _valid(p)})
        with pytest.raises(cfg.ConfigError) as refused:
            _resolve_method(small, {"name": method, p.name: _wrong(p)})
        assert str(refused.value).startswith(f"runs.{PROBE}.method.{p.name}: must be "), str(refused.value)
        for f in p.fields:  # a mapping's keys: each of the wrong kind, and an unknown one
            with pytest.raises(cfg.ConfigError, match=rf"^runs\.{PROBE}\.method\.{p.name}\.{f.name}: must be "):
                _resolve_method(small, {"name": method, p.name: {**_valid(p), f.name: _wrong(f)}})
        if p.fields:
            with pytest.raises(cfg.ConfigError, match=rf"^runs\.{PROBE}\.method\.{p.name}\.{p.fields[0].name}x: "
                                                      rf"unknown key of {p.name}; did you mean '{p.fields[0].name}'"):
                _resolve_method(small, {"name": method, p.name: {**_valid(p), p.fields[0].name + "x": 1}})
    with pytest.raises(cfg.ConfigError) as refused:
        _resolve_method(small, {"name": method, "bogus_key": 1})
    assert str(refused.value).startswith(f"runs.{PROBE}.method.bogus_key: unknown parameter of method {method!r}")
    if declared.names:
        with pytest.raises(cfg.ConfigError, match=rf"did you mean '{declared.names[-1]}'"):
            _resolve_method(small, {"name": method, declared.names[-1] + "x": 1})


@pytest.mark.parametrize("p, value", [(p, v) for p in RUNTIME for v in p.choices])
def test_every_runtime_choice_is_accepted_and_its_misspelling_refused(small, p, value):
    config = copy.deepcopy(small)
    config["runtime"][p.name] = value
    cfg.resolve(config)
    config["runtime"][p.name] = _misspelt(value)
    with pytest.raises(cfg.ConfigError) as refused:
        cfg.resolve(config)
    message = str(refused.value)
    assert f"runtime.{p.name}: " in message and repr(value) in message.partition("did you mean")[2], message


@pytest.mark.parametrize("path, value, expected", [
    (["runtime", "eval_batch_size"], "big", r"runtime\.eval_batch_size: 'big' is not of type 'integer'"),
    (["runtime", "eval_batchsize"], 100, r"runtime\.eval_batchsize: unknown key.*did you mean 'eval_batch_size'\?"),
    (["runs", PROBE, "selection", "mode"], "bset", r"runs\.probe\.selection\.mode: 'bset' is not allowed.*"
                                                   r"did you mean 'best'"),
    (["runs", PROBE, "selection", "exampels"], 10, r"runs\.probe\.selection\.exampels: unknown key.*did you mean "
                                                  r"'examples'\?"),
    (["runs", PROBE, "selection", "examples"], "ten", r"runs\.probe\.selection\.examples: 'ten' is not of type"),
    (["runs", PROBE, "selection", "attack"], "pgd2O", r"runs\.probe\.selection\.attack: unknown attack 'pgd2O'; "
                                                      r"did you mean 'pgd20'"),
])
def test_runtime_and_selection_mistakes_name_the_key(small, path, value, expected):
    config = copy.deepcopy(small)
    node = config
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    with pytest.raises(cfg.ConfigError, match=expected):
        cfg.resolve(config)


def test_the_runtime_settings_are_one_frozen_object_with_one_default_each():
    import dataclasses

    catalog = cfg.load_catalog(PAPER + [cfg.ROOT / "config" / "demo.yaml"])
    assert catalog.runtime_settings.eval_batch_size == 360 and catalog.runtime_settings.eval_unit == "run"
    with pytest.raises(dataclasses.FrozenInstanceError):
        catalog.runtime_settings.eval_batch_size = 1
    from tradeoff.core.settings import runtime_settings

    assert runtime_settings({}).eval_batch_size == RUNTIME["eval_batch_size"].default == 500


def test_a_declaration_is_checked_when_declared_and_documents_itself():
    with pytest.raises(ValueError, match="declared twice"):
        Params(Param("a", NUMBER), Param("a", FLAG))
    with pytest.raises(ValueError, match="unknown kind"):
        Param("a", "float")
    lines = METHODS["generalist"].parameters.document()
    assert any(line.startswith("communication = 'epoch': one of ['epoch', 'iteration']") for line in lines)
    assert any("snapshot_epochs = off" in line and "optional" in line and "epoch-valued" in line for line in lines)
    assert closest("evl", ["train", "eval"]) == "did you mean 'eval'? allowed: ['train', 'eval']"
