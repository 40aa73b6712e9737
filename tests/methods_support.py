"""Shared set-up of the method tests: a resolved smoke-scale spec for any method, and digits batches."""

from __future__ import annotations

import functools

import torch
from torch import nn

from tradeoff import config as cfg
from tradeoff.core.params import ATTACK
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import MethodSpec, RunSpec
from tradeoff.data import load_run_data
from tradeoff.methods import METHODS
from tradeoff.training.train import model_factory

SMOKE = [cfg.ROOT / "config" / "config.yaml", cfg.ROOT / "config" / "smoke.yaml"]
CPU = Runtime(torch.device("cpu"))


@functools.lru_cache(maxsize=1)
def _base():
    catalog = cfg.load_catalog(SMOKE)
    spec = catalog.runs["cifar10-resnet18-at-beta1"]
    return spec, load_run_data(spec, catalog.data_root)


def digits(n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    ds = _base()[1]
    return ds.x_train[:n].clone(), ds.y_train[:n].clone()


def method_spec(name: str, *, eps: float = 0.1, steps: int = 3, lr: float = 0.1, momentum: float = 0.0,
                weight_decay: float = 0.0, **params) -> RunSpec:
    """A resolved spec (digits, small CNN) for method ``name``: its defaults, ``params`` on top, a PGD training
    attack of budget eps and step eps/4, and a constant learning rate with plain SGD unless told otherwise."""
    method = {"name": name, **METHODS[name].parameters.defaults(), **params}
    for key in METHODS[name].parameters.named(type=ATTACK):
        given = method[key] if isinstance(method[key], dict) else {"type": "pgd"}
        pgd = {"random_start": True, "step_size": eps / 4} if given["type"] == "pgd" else {}
        method[key] = {"norm": "linf", "steps": steps, "eps": eps, **pgd, **given}
    return RunSpec.from_dict({
        **_base()[0].as_dict(), "lr": {"epochs": [0], "values": [lr]},
        "optimizer": {"name": "sgd", "momentum": momentum, "weight_decay": weight_decay, "nesterov": False},
        "method": method})


def with_method(spec: RunSpec, **params) -> RunSpec:
    """``spec`` with some of its method's parameters changed."""
    return spec.replace(method=MethodSpec.from_dict({**spec.method.as_dict(), **params}))


class PlainCNN(nn.Module):
    """conv - ReLU - conv - ReLU - pool - linear on 8x8 digits, without BatchNorm: the methods' algebra (which loss,
    which gradient, which update) is tested on it, where a model's train and eval modes compute the same function
    (tests that need BatchNorm pass ``model=TinyBN`` or ``model="small_cnn"``)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1),
                                      nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Linear(16 * 16, 10)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def build(name: str, *, seed: int = 0, model: type[nn.Module] | str | None = None, spec: RunSpec | None = None,
          **params):
    """Method ``name`` on ``spec`` (default: method_spec(name, **params)), its model(s) initialised from
    ``seed``: PlainCNN, or ``model`` (a class taking no arguments, or "small_cnn" for the run's own model)."""
    spec = spec if spec is not None else method_spec(name, **params)
    factory = model_factory(spec, _base()[1]) if model == "small_cnn" else (model or PlainCNN)
    torch.manual_seed(seed)
    return METHODS[name](spec, factory, CPU)


class TinyBN(nn.Module):
    """conv - BatchNorm - ReLU - linear on 8x8 digits: small, with BatchNorm buffers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 64, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


def same_weights(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
