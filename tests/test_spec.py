"""The typed, frozen settings of runs and external models (tradeoff.core.spec): resolved once, read as fields, unchangeable,
and their JSON form the one the digests were always computed from."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from tradeoff import config as cfg
from tradeoff.core.spec import AttackSpec, Backbone, ExternalSpec, FrozenDict, Norm, RunSpec, freeze, thaw

ROOT = Path(__file__).resolve().parents[1]
SCALES = {"paper": [ROOT / "config/config.yaml"],
          "demo": [ROOT / "config/config.yaml", ROOT / "config/demo.yaml"],
          "smoke": [ROOT / "config/config.yaml", ROOT / "config/smoke.yaml"]}


@pytest.fixture(scope="module", params=sorted(SCALES))
def catalog(request):
    return cfg.load_catalog(SCALES[request.param])


def test_every_run_is_typed_and_its_json_form_reads_back_to_the_same_settings(catalog):
    for rid, spec in catalog.runs.items():
        assert isinstance(spec, RunSpec), rid
        plain = spec.as_dict()
        assert json.loads(json.dumps(plain)) == plain  # plain JSON: no tuple, no frozen mapping left
        assert RunSpec.from_dict(plain) == spec
        assert pickle.loads(pickle.dumps(spec)) == spec and copy.deepcopy(spec) == spec
        assert cfg.spec_digest(spec) == cfg.spec_digest(plain)


def test_fields_read_what_the_settings_say(catalog):
    spec = catalog.runs["cifar10-resnet18-generalist"]
    assert spec.method.name == "generalist" and spec.paper_dataset == "cifar10" and spec.paper_arch == "resnet18"
    assert spec.selection.attack.type == "pgd" and spec.selection.examples >= 1
    assert spec.selection.attack.norm is Norm.LINF and isinstance(spec.selection.attack.eps, float)
    assert spec.lr.epochs[0] == 0 and len(spec.lr.epochs) == len(spec.lr.values)
    assert spec.optimizer.name == "sgd" and spec.pretrained is None
    adapter = next(s for s in catalog.runs.values() if s.arch.endswith("_adapter"))
    assert isinstance(adapter.pretrained, Backbone)  # starts from a backbone (its file may be unset: None)


def test_resolved_settings_cannot_be_changed(catalog):
    spec = catalog.runs["cifar10-resnet18-generalist"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.epochs = 1  # type: ignore[misc]
    with pytest.raises(TypeError, match="frozen"):
        spec.method.params["gamma"] = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.selection.attack.eps = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError, match="frozen"):
        spec.selection.attack.params["steps"] = 1
    assert isinstance(spec.lr.values, tuple)
    changed = spec.selection.attack.replace(eps=1.0, steps=3)  # a changed copy
    assert (changed.eps, changed.params["steps"]) == (1.0, 3) and spec.selection.attack.eps != 1.0
    assert spec.replace(epochs=1).epochs == 1 and spec.epochs != 1


def test_unknown_or_missing_settings_are_refused():
    spec = cfg.load_catalog(SCALES["smoke"]).runs["cifar10-resnet18-nt"].as_dict()
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['epochz'\]"):
        RunSpec.from_dict({**spec, "epochz": 3})
    with pytest.raises(ValueError, match="selection: unknown setting"):
        RunSpec.from_dict({**spec, "selection": {**spec["selection"], "exampels": 3}})
    with pytest.raises(ValueError, match="epochs"):
        RunSpec.from_dict({k: v for k, v in spec.items() if k != "epochs"})


def test_an_external_model_and_the_freezing_helpers():
    raw = {"checkpoint": "m.pt", "sha256": None, "arch": "resnet18", "dataset": "cifar10", "paper_dataset": "cifar10",
           "paper_arch": "resnet18", "normalize": {"mean": [0.5, 0.5, 0.5], "std": [0.2, 0.2, 0.2]},
           "format": "auto", "test_examples": None}
    spec = ExternalSpec.from_dict(raw)
    assert spec.normalize["mean"] == (0.5, 0.5, 0.5) and spec.as_dict() == raw
    frozen = freeze({"a": [1, {"b": [2]}]})
    assert isinstance(frozen, FrozenDict) and frozen["a"][1]["b"] == (2,) and thaw(frozen) == {"a": [1, {"b": [2]}]}


def test_attack_specs_are_typed_and_keep_their_json_form(catalog):
    """Catalog.attacks holds AttackSpecs as written; attack_for, a run's selection attack and its method's training
    attack (read through its parameters) are resolved AttackSpecs whose JSON form is the dict the digests hashed:
    the same keys (a resolved sweep budget says step_size: None, another attack leaves it out), in the same order."""
    written = catalog.attacks["pgd20"]
    assert isinstance(written, AttackSpec) and written.as_dict() == catalog.config["attacks"]["pgd20"]
    assert list(written.as_dict()) == list(catalog.config["attacks"]["pgd20"])
    run = "cifar10-resnet18-nt"
    resolved = catalog.attack_for("pgd20", run)
    assert isinstance(resolved, AttackSpec) and resolved.norm is Norm.LINF and isinstance(resolved.step_size, float)
    assert AttackSpec.from_dict(resolved.as_dict()) == resolved
    assert cfg.spec_digest(resolved) == cfg.spec_digest(resolved.as_dict())
    for name in catalog.attack_jobs():
        if catalog.attacks[cfg.split_budget(name)[0]].corruptions:
            continue
        spec = catalog.attack_for(name, run)
        assert isinstance(spec.eps, float) and not isinstance(spec.step_size, str), name  # resolved once
    trades = catalog.runs["cifar10-resnet18-trades-lambda6"]
    from tradeoff.methods import METHODS

    attack = METHODS["trades"].parameters.settings(trades.method.params, "trades").attack
    assert isinstance(attack, AttackSpec) and attack.as_dict() == dict(trades.method.params["attack"])
    with pytest.raises(ValueError, match="norm"):
        AttackSpec.from_dict({"type": "pgd", "norm": "l3"})
    assert AttackSpec(type="pgd", eps=0.1, params=freeze({"steps": 3})).as_dict() == {"type": "pgd", "norm": "linf",
                                                                                         "eps": 0.1, "steps": 3}
