"""No host-device synchronisation per training step or per attack step, checked on the CPU.

On a GPU, reading a tensor's value on the host (``.item()``, ``bool()``, ``float()``, an ``if`` on a tensor) or an
operation whose output size depends on the values (``nonzero``, boolean-mask indexing, ``masked_select``,
``unique``) waits for everything queued on the device: once per step it starves the GPU. CUDA's own detector
(``torch.cuda.set_sync_debug_mode``) needs a GPU (`tradeoff gpu-check` uses it). Here a dispatch mode records every
such operation with the tradeoff function that made it, while real steps run on the CPU.

Limits, honestly: on the CPU every tensor is a host tensor, so a value read from a tensor that is meant to live on
the host (IAT's Beta draw, Adam's step count) looks the same as one read from the device: those sites are listed
below with the reason, and any other site fails. Copies between host and device (``.cpu()``, ``.to(device)`` from
pageable memory) are no-ops on the CPU and are not seen: tests/test_syncs.py's source check covers ``.cpu()``,
``.tolist()`` and ``.numpy()`` in the step code, and docs/gpu.md lists what remains.
"""

from __future__ import annotations

import ast
import traceback
from pathlib import Path

import pytest
import torch
from helpers import ROOT, build_attack
from torch.utils._python_dispatch import TorchDispatchMode

from tradeoff import config as cfg
from tradeoff import models
from tradeoff.core.params import ATTACK
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import MethodSpec, RunSpec
from tradeoff.methods import METHODS
from tradeoff.pipeline.bench.synthetic import synthetic_batch
from tradeoff.training.train import train

CPU = torch.device("cpu")
SRC = ROOT / "src" / "tradeoff"
aten = torch.ops.aten
VALUE_READS = {aten._local_scalar_dense.default, aten.nonzero.default, aten.masked_select.default,
               aten._unique2.default, aten.unique_dim.default, aten.unique_consecutive.default,
               aten.repeat_interleave.Tensor}
INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}

#: value reads that are known and why: host tensors by design, or a sync this test cannot remove (docs/gpu.md)
KNOWN = {
    "methods/iat.py:mixup": "host: mixup's Beta(alpha, alpha) weight is drawn on the CPU from the global generator",
    "methods/fat.py:early_stopped_pgd": "device: FAT's early stop is data-dependent (which examples still search)",
    "attacks/autoattack.py:_seed": "host: a seed drawn from the CPU generator",
    "attacks/autoattack.py:run_component": "device: pyautoattack's APGD (a training attack of CA-AT Figure 3b)",
    "attacks/autoattack.py:_perturb": "device: pyautoattack's APGD in best_loss mode",
    "torch/optim/optimizer.py": "host: Adam's step count is a CPU tensor (not capturable, not fused)",
}


def _site() -> str:
    """The innermost frame of tradeoff (or of torch.optim) that led to the operation: file and function."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        path = Path(frame.filename)
        if "torch/optim/" in frame.filename:
            return f"torch/optim/{path.name}"
        if path.is_relative_to(SRC):
            return f"{path.relative_to(SRC)}:{frame.name}"
    return "(outside tradeoff)"


class Syncs(TorchDispatchMode):
    """Records the operations that would make the host wait for the device, with their site."""

    def __init__(self):
        super().__init__()
        self.sites: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in VALUE_READS:
            self.sites.append(_site())
        elif func in INDEXING:
            indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or ()):
                self.sites.append(_site())
        return func(*args, **kwargs)


def _catalog(**scale_map):
    config = cfg.load_config([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    config["scale_map"].update(scale_map)
    return cfg.resolve(config)


def _step_sites(spec: RunSpec) -> list[str]:
    def build():
        return models.create_model("small_cnn", 10, in_channels=1, image_size=8)

    spec = spec.replace(arch="small_cnn", dataset="digits", pretrained=None)
    torch.manual_seed(0)
    method = METHODS[spec.method.name](spec, build, Runtime(CPU))
    method.set_epoch(1.0)
    x, y = synthetic_batch("digits", 8, CPU)
    method.train_step(x, y)  # warm-up: lazily created optimizer state
    with Syncs() as syncs:
        out = method.train_step(x, y)
    assert torch.isfinite(out["loss"])
    return syncs.sites


def _every_kind_of_step():
    """A run of every kind of training step of the catalog at the smoke scale, and one of each method it lacks."""
    catalog = _catalog()
    runs = dict(catalog.training_runs())
    base = catalog.runs["cifar10-resnet18-at-beta1"]
    for name, cls in METHODS.items():
        if not any(spec.method.name == name for spec in runs.values()):
            method = {"name": name, **cls.parameters.defaults(), **{k: base.method.get("attack") for k in cls.parameters.named(type=ATTACK)}}
            runs[f"({name})"] = base.replace(method=MethodSpec.from_dict(method))
    return runs


def test_a_training_step_of_every_method_reads_no_device_value():
    seen, unexplained, found = set(), {}, set()
    for rid, spec in _every_kind_of_step().items():
        signature = (spec.method.name, spec.method.get("adv_loss"), spec.method.get("inner"), spec.optimizer.name,
                     (spec.method.get("attack") or {}).get("type") if isinstance(spec.method.get("attack"),
                                                                                  dict) else None)
        if signature in seen:
            continue
        seen.add(signature)
        sites = _step_sites(spec)
        found |= set(sites)
        bad = sorted(set(s for s in sites if s not in KNOWN))
        if bad:
            unexplained[rid] = bad
    assert {s[0] for s in seen} == set(METHODS)
    assert {"methods/fat.py:early_stopped_pgd", "methods/iat.py:mixup"} <= found  # the recorder sees what is there
    assert not unexplained, f"host-device syncs in a training step: {unexplained}"


@pytest.mark.parametrize("kind, params", [
    ("pgd", {"steps": 5}), ("pgd", {"steps": 5, "restarts": 2}), ("pgd", {"steps": 5, "norm": "l2"}),
    ("mim", {"steps": 5}), ("cw", {"steps": 5}), ("pgd-dlr", {"steps": 5}), ("fgsm", {}),
])
def test_attack_steps_read_no_device_value(kind, params):
    """The PGD family's steps (and restarts: a restart keeps the examples it broke with torch.where, not a mask)."""
    torch.manual_seed(0)
    model = models.create_model("small_cnn", 10, in_channels=1, image_size=8).eval()
    x, y = synthetic_batch("digits", 8, CPU)
    norm = params.pop("norm", "linf") if "norm" in params else "linf"
    attack = build_attack(kind, model, eps=0.3 if norm == "linf" else 1.0, norm=norm, seed=0, **params)
    with Syncs() as syncs:
        attack.perturb(x, y)
    assert syncs.sites == [], syncs.sites


def _trainer_syncs(tmp_path, batch_size: int, nonfinite: str = "stop") -> int:
    catalog = _catalog(epochs=1, batch_size=batch_size)
    spec = catalog.runs["cifar10-resnet18-at-beta1"].replace(nonfinite=nonfinite)
    with Syncs() as syncs:
        train("syncs", spec, results=tmp_path / f"b{batch_size}{nonfinite}", data_root=catalog.data_root,
              runtime=Runtime(CPU), progress=False)
    return len(syncs.sites)


def test_the_trainer_reads_no_device_value_per_step(tmp_path):
    """The same epoch in 4 steps and in 16: the trainer's reads of device values (the epoch's end: its curves, the
    selection measurement, the non-finite check) do not grow with the steps. With `nonfinite: skip` they do: that
    mode undoes a step at once, so it looks at every loss."""
    four, sixteen = _trainer_syncs(tmp_path, 64), _trainer_syncs(tmp_path, 16)
    assert four == sixteen, (four, sixteen)
    assert _trainer_syncs(tmp_path, 16, "skip") - _trainer_syncs(tmp_path, 64, "skip") == 12


STEP_CODE = {  # the functions that run once per training step or per attack step
    "training/train.py": ["augment", "_to_device", "note"],
    "methods/base.py": ["train_step", "cross_entropy"],
    "methods/common.py": ["adversarial_examples", "adversarial"],
    "methods/pgd_at.py": ["loss"],
    "methods/trades.py": ["kl_divergence", "kl_adversarial", "loss"],
    "methods/vanilla.py": ["gradient_conflict", "losses", "combined_step", "_flat", "loss", "train_step"],
    "methods/caat.py": ["project_gradient", "direction", "train_step"],
    "methods/clp.py": ["softmax_distance", "loss"],
    "methods/iat.py": ["loss"],
    "methods/rst.py": ["loss"],
    "methods/fat.py": ["loss", "train_step"],
    "methods/generalist.py": ["_learner_steps", "_track", "train_step"],
    "attacks/base.py": ["perturb", "project", "steepest_step", "random_start"],
    "attacks/pgd.py": ["margin_loss", "dlr_loss", "targeted_dlr_loss", "_perturb", "start_point", "_one_run"],
}


def test_step_code_copies_nothing_to_the_host():
    """What the dispatch check cannot see on the CPU: no .cpu(), .tolist(), .numpy() or .item() in the functions that
    run per step (a source check: it cannot follow calls into other modules, which the dispatch check does)."""
    found = []
    for name, functions in STEP_CODE.items():
        tree = ast.parse((SRC / name).read_text())
        defined = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert set(functions) <= set(defined), (name, set(functions) - set(defined))
        for function in functions:
            for node in ast.walk(defined[function]):
                if isinstance(node, ast.Attribute) and node.attr in ("cpu", "tolist", "numpy", "item"):
                    found.append(f"{name}:{node.lineno} {function}: .{node.attr}()")
    assert not found, found
