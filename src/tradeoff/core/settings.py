"""The runtime's settings (the config's ``runtime:`` section), declared once with their defaults (tradeoff.core.params), and
read as the fields of one frozen object: :func:`runtime_settings`, or ``Catalog.runtime``. No PyTorch here."""

from __future__ import annotations

from typing import Any

from tradeoff.core.params import FLAG, INTEGER, TEXT, Param, Params
from tradeoff.core.ranges import count

RUNTIME = Params(
    Param("device", TEXT, "auto", choices=("auto", "cpu", "cuda"),
          meaning="auto: CUDA when visible, the CPU at the small scales (tradeoff.core.runtime)"),
    Param("precision", TEXT, "fp32", choices=("fp32", "bf16"), meaning="training precision (bf16 autocast: CUDA only)"),
    Param("channels_last", FLAG, False, meaning="images and weights in the channels_last memory format"),
    Param("compile", TEXT, "off", choices=("off", "default", "reduce-overhead", "max-autotune"),
          meaning="torch.compile mode of the training models"),
    Param("threads", INTEGER, 0, range=count(0), meaning="CPU threads of a job (0: PyTorch's default)"),
    Param("eval_batch_size", INTEGER, 500, range=count(1), meaning="examples per batch of an evaluation"),
    Param("eval_shards", INTEGER, 1, range=count(1), meaning="jobs per evaluation (an attack's `shards` wins)"),
    Param("eval_unit", TEXT, "attack", choices=("attack", "run"),
          meaning="what one evaluation job evaluates: one attack of a run, or all of them"),
)


def runtime_settings(runtime: dict | None) -> Any:
    """A ``runtime:`` section, checked, as a frozen object with every setting (a missing one at its default);
    ConfigError naming ``runtime.<key>`` otherwise."""
    return RUNTIME.settings(runtime or {}, "runtime")
