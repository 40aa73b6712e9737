"""Decoding image files into one uint8 N x 3 x H x W array, in threads (PIL releases the GIL while decoding and
resizing; the order of the results is fixed), with the ImageNet evaluation crop for images larger than the model's
input (CUB-200-2011, Stanford Dogs)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

from tradeoff.data.registry import DatasetError

# Decoding threads.
DECODE_WORKERS = min(8, os.cpu_count() or 1)

# ARES evaluates its ImageNet models at crop fraction 0.875 with bicubic interpolation.
CROP_FRACTION = 0.875


def resize_center_crop(image: Image.Image, size: int) -> Image.Image:
    """The standard ImageNet evaluation transform at crop ``size``: the shorter side is resized (bicubic) to
    ``round(size / 0.875)`` (256 for 224) and the centre ``size`` x ``size`` square is cut out, with the rounding
    rules of torchvision's ``Resize(int)`` and ``CenterCrop``."""
    short = round(size / CROP_FRACTION)
    width, height = image.size
    if width <= height:
        new_w, new_h = short, int(short * height / width)
    else:
        new_w, new_h = int(short * width / height), short
    image = image.resize((new_w, new_h), Image.Resampling.BICUBIC)
    top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
    return image.crop((left, top, left + size, top + size))


def decode(paths: Sequence[Path], shape: tuple[int, int, int], resize: int | None, command: str) -> np.ndarray:
    """Decode image files to one uint8 N x 3 x H x W array (RGB; grey, palette and CMYK files are converted).

    ``resize`` applies ``resize_center_crop``; without it every image must already have the expected size.
    ``command`` is how to fetch the dataset again, named when a file cannot be decoded.
    """
    channels, height, width = shape
    out = np.empty((len(paths), channels, height, width), dtype=np.uint8)

    def decode_one(index: int) -> None:
        path = paths[index]
        try:
            with Image.open(path) as image:
                image = image.convert("RGB")
                if resize is not None:
                    image = resize_center_crop(image, resize)
                pixels = np.asarray(image)
        except (OSError, ValueError) as err:  # PIL's UnidentifiedImageError and truncated files are OSErrors
            raise DatasetError(f"cannot decode {path}: {err}; {command} to fetch it again") from err
        if pixels.shape != (height, width, channels):
            raise DatasetError(f"{path} is {pixels.shape[1]}x{pixels.shape[0]}, expected {width}x{height}; "
                               f"{command} to fetch it again")
        out[index] = pixels.transpose(2, 0, 1)

    with ThreadPoolExecutor(max_workers=DECODE_WORKERS) as pool:
        list(pool.map(decode_one, range(len(paths))))
    return out
