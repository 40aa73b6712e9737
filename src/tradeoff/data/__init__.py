"""Datasets as in-memory tensors: one registry, one loader, checksum-verified downloads (``datasets``), the common
corruptions (``hendrycks``, ``corruptions``, ``digits_c``) and the generated rehearsal data (``generated``).

Importing the package imports no PyTorch: the configuration reads ``generated`` without it. The loaders are
:mod:`tradeoff.data.datasets`' names, reached here on first use.

May import: core, storage.
"""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    return getattr(importlib.import_module("tradeoff.data.datasets"), name)
