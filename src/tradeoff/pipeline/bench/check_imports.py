"""Section a's first part of the GPU node check (:mod:`tradeoff.pipeline.bench.gpucheck`): the versions of Python,
PyTorch (at least ``MIN_TORCH``), CUDA and cuDNN, the devices CUDA sees, and every package the node-side commands
need (``NEEDED``; ``OPTIONAL``: Snakemake, for section e only), each with its version or why it failed to import.
"""

from __future__ import annotations

import importlib
import platform
import re
from importlib import metadata

import torch

#: the oldest PyTorch the check (and the pipeline's code on its paths) runs on: the first node's (docs/gpu.md)
MIN_TORCH = (2, 11)
#: what the node-side commands import beyond the standard library: (module, distribution, needed by); the
#: wheelhouse (config/node-wheels.txt) carries those the node (config/node-packages.txt) lacks, but Snakemake
NEEDED = (("torch", "torch", "everything"), ("numpy", "numpy", "everything"), ("yaml", "PyYAML", "the config"),
          ("jsonschema", "jsonschema", "the config"), ("PIL", "pillow", "the datasets"),
          ("scipy", "scipy", "statistics"), ("statsmodels", "statsmodels", "statistics (McNemar)"),
          ("pyautoattack", "pyautoattack", "AutoAttack"), ("dvclive", "dvclive", "training curves"),
          ("sklearn", "scikit-learn", "the demo's digits"))
OPTIONAL = (("snakemake", "snakemake", "section e (the rehearsal) only; in the wheelhouse"),)


def torch_version_ok(version: str = torch.__version__) -> bool:
    found = tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:2])
    return found >= MIN_TORCH


def imports() -> dict:
    """Section a's first part: the versions of Python, PyTorch, CUDA and cuDNN, the devices CUDA sees, and every
    package the check needs (its version, or why it failed to import)."""
    def probe(rows) -> dict:
        out = {}
        for module, dist, why in rows:
            try:
                importlib.import_module(module)
                try:
                    out[module] = {"version": metadata.version(dist), "for": why}
                except metadata.PackageNotFoundError:
                    out[module] = {"version": "?", "for": why}
            except Exception as exc:  # noqa: BLE001 - what failed is the finding
                out[module] = {"missing": f"{type(exc).__name__}: {exc}", "for": why}
        return out

    cuda = torch.cuda.is_available()
    return {"python": platform.python_version(), "torch": torch.__version__,
            "torch_ok": torch_version_ok(), "min_torch": ".".join(map(str, MIN_TORCH)),
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if cuda else None,
            "cuda_available": cuda, "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if cuda else [], "modules": probe(NEEDED), "optional": probe(OPTIONAL)}


def missing(found: dict) -> list[str]:
    return [m for m, row in (found.get("modules") or {}).items() if "missing" in row]

