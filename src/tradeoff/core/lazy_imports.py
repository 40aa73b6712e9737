"""Modules imported on first use: torchvision (which pulls in torch._dynamo), scikit-learn and SciPy take seconds to
import, and most of the pipeline's jobs never touch them."""

from __future__ import annotations

import importlib


class LazyModule:
    """A module imported when one of its attributes is first read."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)
