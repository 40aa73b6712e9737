"""NT: natural training, cross-entropy on clean inputs."""

from __future__ import annotations

from tradeoff.core.passes import TRAIN1
from tradeoff.methods.base import SingleLearner, cross_entropy, register


@register
class Natural(SingleLearner):
    name = "nt"

    @classmethod
    def passes(cls, p, classes):
        return TRAIN1

    def loss(self, x, y):
        return cross_entropy(self.model, x, y, self.runtime)
