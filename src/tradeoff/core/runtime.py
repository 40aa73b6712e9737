"""Where and how tensors are computed: device, training precision and memory format.

Training is fp32 with PyTorch's defaults unless ``runtime.precision: bf16`` opts into bf16 autocast (CUDA only), which
changes the trained weights beyond rounding (docs/differences.md). Evaluation never uses this autocast: every reported
number is computed in fp32.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tradeoff.core import gpus
from tradeoff.core.errors import ConfigError
from tradeoff.core.settings import runtime_settings

#: the scales at which ``device: auto`` falls back to the CPU when no GPU is visible (see Runtime.from_config)
CPU_SCALES = ("demo", "smoke", "rehearsal")
#: CUDA_VISIBLE_DEVICES values that hide a node's GPUs on purpose (the test suite's, a user's choice of the CPU)
HIDDEN = ("", "-1")


@dataclass(frozen=True)
class Runtime:
    device: torch.device
    bf16: bool = False
    channels_last: bool = False
    #: torch.compile mode for training models: None (off), "default", "reduce-overhead" (CUDA graphs: for
    #: small models where kernel launches dominate), "max-autotune"
    compile: str | None = None

    @classmethod
    def from_config(cls, runtime: Any, scale: str | None = None) -> "Runtime":
        """The runtime of a config's ``runtime:`` section (a dict, or its settings as Catalog.runtime_settings gives
        them). ``device: auto`` is CUDA when a device is visible. Without
        one it is an error on a node that has NVIDIA GPUs, unless CUDA_VISIBLE_DEVICES hides them on purpose (empty
        or -1): a job given no GPU there (or a PyTorch without CUDA) is a misconfiguration, whatever the scale.
        Elsewhere it is the CPU at the small scales (``CPU_SCALES``: digits, minutes) and an error at the paper
        scale, where the CPU would take weeks (ResNet-18's 120 epochs of PGD-AT: ~15 days): a job that lands on a
        node without a GPU stops at once. ``device: cpu`` always uses the CPU."""
        settings = runtime_settings(runtime) if runtime is None or isinstance(runtime, Mapping) else runtime
        name = settings.device
        if name == "auto":
            if torch.cuda.is_available():
                name = "cuda"
            elif (found := gpus.driver_gpus()) and os.environ.get("CUDA_VISIBLE_DEVICES") not in HIDDEN:
                raise ConfigError(f"runtime.device is 'auto' and this node has NVIDIA GPUs ({found} in "
                                  f"{gpus.NVIDIA_GPUS}) but PyTorch sees none (CUDA_VISIBLE_DEVICES="
                                  f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}, PyTorch {torch.__version__} "
                                  f"built for CUDA {torch.version.cuda}): the job was given no GPU (a scheduler job "
                                  "without --gpus) or its PyTorch has no CUDA; ask for a GPU, or put "
                                  "`runtime: {device: cpu}` in an overlay to use the CPU anyway")
            elif scale is None or scale in CPU_SCALES:
                name = "cpu"
            else:
                raise ConfigError(f"runtime.device is 'auto' and no CUDA device is visible (CUDA_VISIBLE_DEVICES="
                                  f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')!s}): at the {scale} scale the "
                                  "CPU takes days to weeks per run; run on a GPU node, or put `runtime: {device: cpu}` "
                                  "in an overlay to use the CPU anyway")
        if name == "cuda" and not torch.cuda.is_available():
            raise ConfigError("runtime.device is 'cuda' but no CUDA device is visible; use 'auto' or 'cpu'")
        device = torch.device(name)
        threads = int(settings.threads or 0)
        if threads:
            torch.set_num_threads(threads)
        on_cuda = device.type == "cuda"
        mode = settings.compile
        # channels_last applies on the CPU as well (oneDNN's convolutions and pooling prefer it: a training step of
        # the demo CNN is ~15% faster, ResNet-18's unchanged); bf16 autocast stays CUDA-only
        precision = settings.precision
        return cls(device, bf16=precision == "bf16" and on_cuda,
                   channels_last=bool(settings.channels_last),
                   compile=None if mode == "off" else mode)

    @property
    def precision(self) -> str:
        """The training precision in effect (bf16 asked for on the CPU stays fp32)."""
        return "bf16" if self.bf16 else "fp32"

    def autocast(self) -> contextlib.AbstractContextManager:
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def place_model(self, model: nn.Module) -> nn.Module:
        model = model.to(self.device)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        if self.compile:
            model.compile(mode=self.compile)  # in place: state_dict keys stay those of the plain model
        return model

    def place_batch(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.device, non_blocking=True)
        if self.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        return x
