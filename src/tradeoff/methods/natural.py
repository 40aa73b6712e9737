"""NT: natural training, cross-entropy on clean inputs."""

from __future__ import annotations

from tradeoff.methods.base import SingleLearner, cross_entropy, register
from tradeoff.methods.declared import natural as declared


@register
class Natural(declared.Natural, SingleLearner):
    def loss(self, x, y):
        return cross_entropy(self.model, x, y, self.runtime)
