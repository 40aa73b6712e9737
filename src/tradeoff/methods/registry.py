"""Every training method, implemented: importing this module fills ``METHODS`` (it imports every method module) and
gives the package's names (tradeoff.methods reads them here)."""

from tradeoff.methods import caat, clp, fat, generalist, iat, natural, pgd_at, rst, trades, vanilla  # noqa: F401  (registers)
from tradeoff.methods.base import METHODS, Method, SingleLearner, register

__all__ = ["METHODS", "Method", "SingleLearner", "register"]
