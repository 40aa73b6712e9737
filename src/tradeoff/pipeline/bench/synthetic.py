"""What a bench runs on: each dataset's image shape, classes and split sizes (from the declarations: no data), a
seeded synthetic batch of that shape, and a run's method on a freshly built model (no pretrained weights: FLOPs and
step times do not depend on them).
"""

from __future__ import annotations

import torch

from tradeoff import models
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import RunSpec
from tradeoff.data.declared import DECLARED as DATASET_DECLARATIONS
from tradeoff.data.declared import SPLIT_SIZES
from tradeoff.methods import METHODS

TRAIN_SIZES = {name: sizes[0] for name, sizes in SPLIT_SIZES.items()}
TEST_SIZES = {name: sizes[1] for name, sizes in SPLIT_SIZES.items()}
SHAPES = {name: (*d.image_shape, d.num_classes) for name, d in DATASET_DECLARATIONS.items()}  # (c, h, w, classes)


def synthetic_batch(dataset: str, batch: int, device: torch.device, seed: int = 0):
    c, h, w, k = SHAPES[dataset]
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(batch, c, h, w, generator=gen).to(device), torch.randint(0, k, (batch,), generator=gen).to(device)


def synthetic_method(spec: RunSpec, runtime: Runtime):
    """A run's method on its architecture, built for its dataset's shape (no pretrained file)."""
    c, h, _, k = SHAPES[spec.dataset]

    def build():
        # FLOPs and step times do not depend on the weights: an adapter model needs no pretrained file here
        return models.create_model(spec.arch, k, in_channels=c, image_size=h,
                                   bn_running_stats=spec.bn_running_stats)

    return METHODS[spec.method.name](spec, build, runtime)
