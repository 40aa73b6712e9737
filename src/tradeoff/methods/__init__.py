"""Training methods: a registry of classes that update their learner(s) given a batch.

May import: core, storage, data, attacks.
"""

from tradeoff.methods import caat, clp, fat, generalist, iat, natural, pgd_at, rst, trades, vanilla  # noqa: F401  (registers)
from tradeoff.methods.base import METHODS, Method, SingleLearner, method_names, register

__all__ = ["METHODS", "Method", "SingleLearner", "method_names", "register"]
