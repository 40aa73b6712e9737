"""RST as the Generalist paper compares it (its ref. [26]: Raghunathan, Xie, Yang, Duchi and Liang, "Understanding and
mitigating the tradeoff between robustness and accuracy", ICML 2020; code p-lambda/robust_tradeoff), on labeled data
only ("labeled data for fair comparison"):

    loss = (1 - beta) CE(f(x), y) + beta CE(f(x'), y),   beta = 1/2,

which is that code's adversarial-training loss (``madry_loss``, separate clean and adversarial passes), with the
training attack run with the model in eval mode, as that code does; its attack starts at x + 0.001 N(0, 1) (the
catalog's training attack ``pgd10-rst``: ``start: normal``, not clipped before the first step). The eval-mode
attack is what sets it apart from AT(beta = 1/2), whose attack runs in train mode. (Carmon et al.'s RST, 2019, is
another method of the same name, trained with TRADES' loss.)

``unlabeled`` optionally names a user-supplied ``.pt`` file holding ``{"x": images, "y": pseudo_labels}``
(images N x C x H x W in [0, 1] like the run's dataset, integer labels): every step then appends as many
pseudo-labelled images as the labelled batch holds (RST's unlabeled fraction 1/2), drawn uniformly with
replacement from the global RNG, and trains on both. Nothing is ever downloaded.
"""

from __future__ import annotations

from pathlib import Path

from tradeoff.core.lazy_imports import LazyModule
from tradeoff.core.params import TEXT, Param
from tradeoff.methods.base import register
from tradeoff.methods.pgd_at import PGDAT
from tradeoff.storage import checkpoint

torch = LazyModule("torch")


def load_unlabeled(path: str | Path) -> tuple[torch.Tensor, torch.Tensor]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"rst: unlabeled data {str(path)!r} does not exist; it must be a .pt file you provide, holding "
            "{'x': float images in [0, 1], N x C x H x W, 'y': integer pseudo-labels, N} (it is never downloaded)")
    data = checkpoint.load(path)  # weights only, as every tensor file: a damaged or pickled one is one line
    if not isinstance(data, dict) or not {"x", "y"} <= set(data):
        raise ValueError(f"rst: {path} must hold a dict with keys 'x' and 'y'")
    x, y = data["x"], data["y"]
    if x.dim() != 4 or not x.is_floating_point() or len(x) != len(y) or y.dim() != 1 or y.is_floating_point():
        raise ValueError(f"rst: {path}: expected float x of shape N x C x H x W and integer y of shape N, got "
                         f"x {tuple(x.shape)} {x.dtype}, y {tuple(y.shape)} {y.dtype}")
    if len(x) == 0 or x.min() < 0 or x.max() > 1:
        raise ValueError(f"rst: {path}: images must be non-empty and in [0, 1]")
    return x.float(), y.long()


@register
class RST(PGDAT):
    name = "rst"
    parameters = PGDAT.parameters.extend(
        Param("unlabeled", TEXT, None, nullable=True, meaning="a .pt file of pseudo-labelled images you provide"),
        beta=0.5, attack="pgd10-rst", attack_mode="eval")

    @classmethod
    def passes(cls, p, classes):
        """PGD-AT's step, on twice the images with ``unlabeled`` (as many pseudo-labelled as labelled)."""
        return super().passes(p, classes) * (2 if p.unlabeled else 1)

    def __init__(self, spec, build_model, runtime):
        super().__init__(spec, build_model, runtime)
        self.unlabeled = None
        if self.p.unlabeled:
            x, y = load_unlabeled(self.p.unlabeled)
            self.unlabeled = runtime.place_batch(x), y.to(runtime.device)

    def loss(self, x, y):
        if self.unlabeled is None:
            return super().loss(x, y)
        x_u, y_u = self.unlabeled
        if x_u.shape[1:] != x.shape[1:]:
            raise ValueError(f"rst: unlabeled images are {tuple(x_u.shape[1:])}, the run's are {tuple(x.shape[1:])}")
        pick = torch.randint(len(x_u), (len(x),), device=x.device)
        loss, logits = super().loss(torch.cat([x, x_u[pick]]), torch.cat([y, y_u[pick]]))
        return loss, logits[: len(x)]  # accuracy on the labelled part
