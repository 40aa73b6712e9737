"""The split sizes that must be known without the data (imports nothing: no PyTorch, no dataset module).

Wherever the data is at hand, its sizes are read from it (``len(data.x_train)``); a size is declared here only for the
consumers that must know it before or without any data:

- the cost plan (:mod:`tradeoff.pipeline.bench` copies these sizes into its ``flops.json``, from which
  :mod:`tradeoff.pipeline.costs` prices every job on a machine that holds no dataset and imports no PyTorch);
- the configuration's check of ``validation.<dataset>`` (it must hold out fewer images than the training split
  has), made when the configuration is resolved, before any job runs;
- Generalist's iterations per epoch, which turn its ``ema_horizon`` (in epochs) into a per-iteration decay: the
  published training split at every scale, so that the horizon is the paper's whatever subset a scale trains on.

Each entry is (training, test) images as published (digits: the fixed stratified 80/20 split of
:class:`tradeoff.data.torchvision_sets.Digits`). tests/test_data.py checks every dataset with a training split has
one, and digits' against the data."""

from __future__ import annotations

SPLIT_SIZES: dict[str, tuple[int, int]] = {
    "digits": (1437, 360), "mnist": (60000, 10000), "svhn": (73257, 26032), "cifar10": (50000, 10000),
    "cifar100": (50000, 10000), "tinyimagenet": (100000, 10000), "cub200": (5994, 5794),
    "stanford-dogs": (12000, 8580),
}
