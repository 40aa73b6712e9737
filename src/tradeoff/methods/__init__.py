"""Training methods: a registry of classes that update their learner(s) given a batch."""

from . import natural, pgd_at  # noqa: F401  (registers)
from .base import METHODS, Method, SingleLearner, method_names, register

__all__ = ["METHODS", "Method", "SingleLearner", "method_names", "register"]
