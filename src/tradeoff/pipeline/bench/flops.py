"""FLOP counts, and the table of pass FLOPs that cost planning uses.

FLOPs are counted, not estimated: ``torch.utils.flop_counter.FlopCounterMode`` records the matmul and
convolution FLOPs that one real training step executes (forward, attack, backward; an attack's input-only
backward costs what it really costs). ``pass_flops`` counts what one forward and backward pass of an architecture
costs; ``tradeoff bench-flops`` writes them for every architecture of the shipped scales into the table that
:mod:`tradeoff.pipeline.costs` plans every job with, without PyTorch (so that Snakemake sizes its jobs at start-up).
"""

from __future__ import annotations

import json

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop, sdpa_flop

from tradeoff import models
from tradeoff.attacks import frozen
from tradeoff.config import Catalog
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import RunSpec
from tradeoff.data import corruption_dataset, corruption_dataset_names
from tradeoff.data.hendrycks import SEVERITIES
from tradeoff.pipeline.bench.synthetic import SHAPES, TEST_SIZES, TRAIN_SIZES, synthetic_batch, synthetic_method
from tradeoff.pipeline.costs import pass_key


class _GlobalOnly:
    """FlopCounterMode's module tracker hooks every module's inputs for a per-module breakdown, which fails
    under autograd.grad when a module's input is a leaf (TRADES' KL attack). Totals need no breakdown."""

    parents = {"Global"}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _cpu_attention_formulas() -> dict:
    """PyTorch's FLOP counter prices scaled dot-product attention's CUDA kernels but not the CPU's (flash attention
    for the CPU): a ViT's attention counted on the CPU would be free. Its CPU kernels take the same leading arguments
    as the CUDA flash kernels, so they are priced by the same formulas."""
    aten = torch.ops.aten
    pairs = (("_scaled_dot_product_flash_attention_for_cpu", sdpa_flop),
             ("_scaled_dot_product_flash_attention_for_cpu_backward", sdpa_backward_flop))
    # the module's formulas come shape-wrapped (FlopCounterMode wraps a custom mapping's again): the plain ones
    return {getattr(aten, op): formula.__wrapped__ for op, formula in pairs if hasattr(aten, op)}


def count_flops() -> FlopCounterMode:
    counter = FlopCounterMode(display=False, custom_mapping=_cpu_attention_formulas())
    counter.mod_tracker = _GlobalOnly()
    return counter


def step_flops_per_example(spec: RunSpec, batch: int = 2) -> float:
    """FLOPs of one training step per example, counted on the CPU for a small batch."""
    torch.manual_seed(0)
    method = synthetic_method(spec, Runtime(torch.device("cpu")))
    method.set_epoch(0.0)
    x, y = synthetic_batch(spec.dataset, batch, torch.device("cpu"))
    with count_flops() as counter:
        method.train_step(x, y)
    return counter.get_total_flops() / batch


def forward_flops_per_example(arch: str, dataset: str) -> float:
    c, h, _, k = SHAPES[dataset]
    model = models.create_model(arch, k, in_channels=c, image_size=h).eval()
    with count_flops() as counter, torch.no_grad():
        model(torch.rand(1, c, h, h))
    return float(counter.get_total_flops())


# ------------------------------------------------------------------------------------------------ FLOP table


def pass_flops(arch: str, dataset: str, batch: int = 2) -> dict[str, float]:
    """FLOPs per example of one forward pass of an architecture on a dataset's images, of one input-only backward
    pass (an attack's gradient: the weights frozen) and of one training backward pass (the gradients of the weights
    that train: an adapter model's backbone is frozen), counted on the CPU: the pass costs of tradeoff.pipeline.costs."""
    c, h, _, k = SHAPES[dataset]
    torch.manual_seed(0)
    model = models.create_model(arch, k, in_channels=c, image_size=h).train()
    x, _ = synthetic_batch(dataset, batch, torch.device("cpu"))
    with count_flops() as counter:
        model(x)
    forward = counter.get_total_flops() / batch
    trainable = [p for p in model.parameters() if p.requires_grad]
    with frozen(model):
        xi = x.clone().requires_grad_(True)
        out = model(xi).float().sum()
        with count_flops() as counter:
            torch.autograd.grad(out, xi)
    input_backward = counter.get_total_flops() / batch
    out = model(x).float().sum()
    with count_flops() as counter:
        torch.autograd.grad(out, trainable)
    return {"forward": forward, "input_backward": input_backward, "train_backward": counter.get_total_flops() / batch}


#: the configurations whose runs the FLOP table covers: the paper scale and each shipped scale
SHIPPED_SCALES = (("config/config.yaml",), ("config/config.yaml", "config/demo.yaml"),
                  ("config/config.yaml", "config/smoke.yaml"))


def shipped_pairs(catalogs: list[Catalog]) -> list[tuple[str, str]]:
    """The (architecture, dataset) of every run of these catalogs."""
    return sorted({(s.arch, s.dataset) for c in catalogs for s in c.runs.values()})


def flops_table(catalogs: list[Catalog], *, known: dict | None = None, recount: bool = True) -> dict:
    """tradeoff.pipeline.costs' table (flops.json) for the runs of these catalogs: each (architecture, dataset)'s pass costs
    (``recount=False`` keeps those already in ``known``), each dataset's sizes and classes, each corruption
    dataset's images per test image."""
    passes = {}
    for arch, dataset in shipped_pairs(catalogs):
        key = pass_key(arch, dataset)
        kept = (known or {}).get("passes", {}).get(key)
        passes[key] = kept if kept is not None and not recount else pass_flops(arch, dataset)
    datasets = {name: {"train": TRAIN_SIZES[name], "test": TEST_SIZES[name], "classes": SHAPES[name][3]}
                for name in sorted(TRAIN_SIZES) if name in SHAPES}
    corruptions = {name: len(corruption_dataset(name).corruptions) * len(SEVERITIES)
                   for name in sorted(corruption_dataset_names())}
    return {"about": "FLOPs per example of one pass (forward, input-only backward, training backward) of each "
                     "architecture on each dataset, counted by `tradeoff bench-flops` "
                     "(tradeoff.pipeline.bench.flops.pass_flops); read by tradeoff.pipeline.costs, kept current by "
                     "tests/test_costs.py",
            "passes": passes, "datasets": datasets, "corruption_images": corruptions}


def format_flops_table(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"

