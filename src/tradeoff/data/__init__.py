"""Datasets as in-memory tensors: one registry filled by a decorator, checksum-verified downloads and archives, a
cache of decoded images, the common corruptions and their datasets, a run's splits, and the generated rehearsal data.

One module per thing: ``declared`` (what every dataset is without its data: names, image shapes, classes, split
sizes; torch-free, what the configuration reads), ``registry`` (Data, DatasetSpec, DATASETS and its ``dataset``
decorator, which registers a declared dataset's code), ``fetch``
(checksums, fetching with a retry), ``archives`` (md5-checked extraction, manifests), ``cache`` (decoded images kept
next to the data), ``decode`` (image files to arrays), ``torchvision_sets`` (digits, MNIST, SVHN, CIFAR),
``archive_sets`` (Tiny ImageNet, Tiny-ImageNet-C, CUB-200-2011, Stanford Dogs), ``corruption_sets`` and ``digits_c``
(datasets of corrupted test images), ``hendrycks`` and ``corruptions`` (the corruptions, NROB), ``datasets`` (every
dataset by name), ``splits`` (a run's data), ``generated`` (the rehearsal's generated files) and ``roots`` (the
data root's kinds: where generated files may be read).

Importing the package imports no PyTorch (the configuration and the report jobs read ``declared`` and ``roots``
without it, nor NumPy): its names below are reached in their modules on first use, through the one table ``_NAMES``.

May import: core, storage.
"""

from __future__ import annotations

from tradeoff.core.lazy_imports import lazy_package

#: the package's names -> the module that owns each, imported when the name is first read (spelled out in full:
#: DVC's stages depend on the modules named here, tradeoff.pipeline.dvc_export)
_NAMES = {
    **dict.fromkeys(["DATASETS", "Data", "DatasetError", "DatasetSpec", "corruption_dataset", "download",
                     "is_downloaded", "load", "load_corruptions"], "tradeoff.data.datasets"),
    **dict.fromkeys(["VALIDATION_SEED", "hold_out", "load_run_data", "selection_images", "subset",
                     "validation_indices"], "tradeoff.data.splits"),
    **dict.fromkeys(["CORRUPTIONS", "SEVERITIES"], "tradeoff.data.hendrycks"),
    **dict.fromkeys(["DECLARED", "SPLIT_SIZES", "corruption_dataset_names", "dataset_names"],
                    "tradeoff.data.declared"),
}


__getattr__, __dir__ = lazy_package(__name__, _NAMES)
