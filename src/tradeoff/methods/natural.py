"""NT: natural training, cross-entropy on clean inputs."""

from __future__ import annotations

from tradeoff.methods.base import SingleLearner, cross_entropy, register


@register
class Natural(SingleLearner):
    name = "nt"

    def loss(self, x, y):
        return cross_entropy(self.model, x, y, self.runtime)
