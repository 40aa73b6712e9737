"""digits-c: the 8x8 digits test split under Hendrycks & Dietterich's common corruptions, built locally.

It stands in for Tiny-ImageNet-C at the demo and smoke scales, where every run is mapped onto scikit-learn's digits
and nothing can be downloaded. Every corruption is the function of Hendrycks' ``make_tinyimagenet_c.py`` (the
generator of Tiny-ImageNet-C, whose NROB Zipper's Table 4 reports) with its published parameter table, rewritten
with NumPy, SciPy and Pillow (the original also needs scikit-image, OpenCV and ImageMagick) and seeded: the random
numbers of (corruption, severity) come from ``numpy.random.default_rng([seed, i, severity])``, i being the
corruption's position among the 15, so each set is reproducible on its own. How each is carried over to 8x8
grayscale images:

- Per pixel (Gaussian, shot and impulse noise, brightness, contrast): on the 8x8 image, as published. For a gray
  image HSV's value is the gray level, so brightness adds c to it.
- On the pixel grid (JPEG, pixelate): on the 8x8 image. JPEG acts on 8x8 pixel blocks whatever the image size, and
  the digit is exactly one block (enlarged, every block would be constant and JPEG nearly lossless). Pixelate's c
  is a fraction of the image's own resolution: 8c = 7.2 ... 4 cells, a non-integer number of cells of width 1 / c
  (see ``_pixelate_matrix``); enlarged, a digit is already coarser than any of its severities and would not change.
- Lengths measured on Tiny-ImageNet-C's 64x64 images (defocus, glass, motion and zoom blur, snow, fog): the digit is
  enlarged 8x to 64x64 by pixel replication, corrupted as published, and shrunk back by averaging each 8x8 block,
  so every length keeps its ratio to the image (a blur radius of 3 pixels is 3/64 of the image in both). Zoom
  blur, linear and separable, is computed exactly that way as 8x8 matrices (at 64x64 it would take seconds).
  Pillow's and ImageMagick's 8-bit rounding between steps (the PNG that ImageMagick's motion blur is read back
  from) is not reproduced; the 8-bit casts written out in the published functions are.
- Not built, so digits-c has 13 of the 15 corruptions: frost blends crops of six frost photographs that ship with
  Hendrycks' code and are not available here; elastic_transform's severities trade a global affine distortion
  (largest at severity 1) for a local displacement field smoothed over 1.9 to 19 of the 64 pixels, which is below
  one digit pixel, so on 8x8 digits only the affine part is left and the corruption would weaken as severity grows
  (measured: the mean distance to the clean digits falls from 0.10 at severity 1 to 0.04 at 5).

Corrupted images are stored as 8-bit values, truncated as Tiny-ImageNet-C's files are (``np.uint8``); those files
are then JPEG-encoded at quality 85, which is not done here.

The dataset itself (:class:`DigitsC`, registered as ``digits-c``) is not downloaded: ``download`` builds it and stores
it in its folder, stamped so that a stale copy is built again.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from tradeoff.core.lazy_imports import LazyModule
from tradeoff.data.cache import cache_fingerprint, cached
from tradeoff.data.corruption_sets import CorruptedTestSets
from tradeoff.data.fetch import verified_folder
from tradeoff.data.hendrycks import CORRUPTIONS as ALL_CORRUPTIONS
from tradeoff.data.hendrycks import SEVERITIES
from tradeoff.data.registry import DATASETS, Data, DatasetSpec, dataset, label_tensor, unit_float

ndi = LazyModule("scipy.ndimage")

#: Changes with anything that changes the images (it is part of the stored set's fingerprint).
VERSION = 1
SEED = 0

SIZE = 8       # the digits' side
LARGE = 64     # Tiny-ImageNet-C's side, where lengths are measured
_BLOCK = LARGE // SIZE


# ------------------------------------------------------------------------------------------ 8x8 <-> 64x64


def _enlarge(x: np.ndarray) -> np.ndarray:
    """(N, 8, 8) -> (N, 64, 64), every pixel an 8x8 block."""
    return np.repeat(np.repeat(x, _BLOCK, axis=-2), _BLOCK, axis=-1)


def _shrink(x: np.ndarray) -> np.ndarray:
    """(N, 64, 64) -> (N, 8, 8), the mean of every 8x8 block."""
    return x.reshape(*x.shape[:-2], SIZE, _BLOCK, SIZE, _BLOCK).mean(axis=(-3, -1))


def _at_large(x: np.ndarray, on_large: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    return _shrink(on_large(_enlarge(x)))


def _gaussian(x: np.ndarray, sigma: float) -> np.ndarray:
    """skimage.filters.gaussian of each image with its defaults (mode 'nearest', truncate 4)."""
    return ndi.gaussian_filter(x, (0, sigma, sigma), mode="nearest", truncate=4.0)


def _clipped_zoom_matrix(zoom: float, size: int = LARGE) -> np.ndarray:
    """(size x size) matrix of Hendrycks' clipped_zoom along one axis: the central ceil(size / zoom) pixels zoomed
    by ``zoom`` (scipy.ndimage.zoom, order 1) and the centre ``size`` kept. The 2-D zoom is separable: M @ x @ M.T."""
    crop = int(np.ceil(size / zoom))
    top = (size - crop) // 2
    zoomed = ndi.zoom(np.eye(size)[top:top + crop], (zoom, 1), order=1)
    trim = (zoomed.shape[0] - size) // 2
    return zoomed[trim:trim + size]


def _motion_blur(x: np.ndarray, radius: float, sigma: float, angles: np.ndarray) -> np.ndarray:
    """ImageMagick's MotionBlurImage (which Hendrycks calls through Wand), image n blurred at ``angles[n]`` degrees:
    out(y, x) = sum_i k_i in(y + round(i sin a), x + round(i cos a)) over i < 2 ceil(radius) + 1, one-sided Gaussian
    weights k_i proportional to exp(-i^2 / 2 sigma^2), halves rounded down, edge pixels repeated past the border."""
    width = 2 * math.ceil(radius) + 1
    taps = np.arange(width)
    weights = np.exp(-taps.astype(float) ** 2 / (2 * sigma ** 2))
    weights /= weights.sum()
    theta = np.deg2rad(angles)[:, None]
    dy = np.ceil(taps * np.sin(theta) - 0.5).astype(int)
    dx = np.ceil(taps * np.cos(theta) - 0.5).astype(int)
    padded = np.pad(x, ((0, 0), (width, width), (width, width)), mode="edge")
    height, breadth = x.shape[1:]
    out = np.zeros_like(x)
    for n in range(len(x)):
        for weight, oy, ox in zip(weights, dy[n] + width, dx[n] + width):
            out[n] += weight * padded[n, oy:oy + height, ox:ox + breadth]
    return out


def _plasma_fractal(count: int, mapsize: int, decay: float, rng: np.random.Generator) -> np.ndarray:
    """Hendrycks' diamond-square height maps (mapsize a power of two), ``count`` of them, each scaled to [0, 1]."""
    maps = np.zeros((count, mapsize, mapsize))
    step, wibble = mapsize, 100.0

    def wibbled_mean(total: np.ndarray) -> np.ndarray:
        return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

    while step >= 2:
        half = step // 2
        corners = maps[:, 0::step, 0::step]
        squares = corners + np.roll(corners, -1, axis=1)
        squares += np.roll(squares, -1, axis=2)
        maps[:, half::step, half::step] = wibbled_mean(squares)
        centres, corners = maps[:, half::step, half::step], maps[:, 0::step, 0::step]
        left = centres + np.roll(centres, 1, axis=1) + corners + np.roll(corners, -1, axis=2)
        maps[:, 0::step, half::step] = wibbled_mean(left)
        top = centres + np.roll(centres, 1, axis=2) + corners + np.roll(corners, -1, axis=1)
        maps[:, half::step, 0::step] = wibbled_mean(top)
        step //= 2
        wibble /= decay
    maps -= maps.min(axis=(1, 2), keepdims=True)
    return maps / maps.max(axis=(1, 2), keepdims=True)


# ------------------------------------------------------------------------------------------- corruptions
# Each takes images (N, 8, 8) in [0, 1], a severity 1..5 and a generator, and returns (N, 8, 8). The parameter
# tables are make_tinyimagenet_c.py's.


def gaussian_noise(x, severity, rng):
    c = [0.04, 0.08, .12, .15, .18][severity - 1]
    return np.clip(x + rng.normal(size=x.shape, scale=c), 0, 1)


def shot_noise(x, severity, rng):
    c = [250, 100, 50, 30, 15][severity - 1]
    return np.clip(rng.poisson(x * c) / c, 0, 1)


def impulse_noise(x, severity, rng):
    # skimage.util.random_noise(mode='s&p'): each pixel replaced with probability c, by 1 or 0 with equal odds
    c = [.01, .02, .05, .08, .14][severity - 1]
    replaced = rng.random(x.shape) < c
    salt = rng.random(x.shape) < 0.5
    return np.where(replaced, salt.astype(x.dtype), x)


def defocus_blur(x, severity, rng):
    radius, alias_blur = [(0.5, 0.6), (1, 0.1), (1.5, 0.1), (2.5, 0.01), (3, 0.1)][severity - 1]
    grid = np.arange(-8, 8 + 1)  # the published window for radii up to 8
    disk = (grid[:, None] ** 2 + grid[None, :] ** 2 <= radius ** 2).astype(float)
    disk /= disk.sum()
    # cv2.GaussianBlur(ksize=(3, 3), sigmaX=alias_blur) of the disk
    taps = np.exp(-np.array([-1.0, 0.0, 1.0]) ** 2 / (2 * alias_blur ** 2))
    kernel = ndi.correlate1d(ndi.correlate1d(disk, taps / taps.sum(), axis=0, mode="mirror"),
                             taps / taps.sum(), axis=1, mode="mirror")
    rows = np.flatnonzero(kernel.any(axis=1))  # the support: symmetric, so the centre stays the centre
    kernel = kernel[rows[0]:rows[-1] + 1, rows[0]:rows[-1] + 1]
    # cv2.filter2D: correlation, borders reflected without repeating the edge (scipy's 'mirror')
    return _at_large(x, lambda big: np.clip(ndi.correlate(big, kernel[None], mode="mirror"), 0, 1))


def glass_blur(x, severity, rng):
    sigma, delta, iterations = [(0.1, 1, 1), (0.5, 1, 1), (0.6, 1, 2), (0.7, 2, 1), (0.9, 2, 2)][severity - 1]

    def on_large(big):
        count = len(big)
        # pixels as rows, images as columns: each swap below moves one row slice for every image at once
        pixels = np.floor(_gaussian(big, sigma) * 255).reshape(count, -1).T.copy()
        images = np.arange(count)
        positions = [(h, w) for h in range(LARGE - delta, delta, -1) for w in range(LARGE - delta, delta, -1)]
        for _ in range(iterations):
            # the published loop draws (dx, dy) in [-delta, delta) per position and swaps the pixel with (h+dy, w+dx)
            shifts = rng.integers(-delta, delta, size=(len(positions), 2, count))
            for (h, w), (dx, dy) in zip(positions, shifts):
                here, there = h * LARGE + w, (h + dy) * LARGE + (w + dx)
                kept = pixels[here].copy()
                pixels[here] = pixels[there, images]
                pixels[there, images] = kept
        return np.clip(_gaussian(pixels.T.reshape(big.shape) / 255, sigma), 0, 1)

    return _at_large(x, on_large)


def motion_blur(x, severity, rng):
    radius, sigma = [(10, 1), (10, 1.5), (10, 2), (10, 2.5), (12, 3)][severity - 1]
    angles = rng.uniform(-45, 45, size=len(x))
    return _at_large(x, lambda big: np.clip(_motion_blur(big, radius, sigma, angles), 0, 1))


def zoom_blur(x, severity, rng):
    top = [1.06, 1.11, 1.16, 1.21, 1.26][severity - 1]
    factors = np.arange(1, top, 0.01)
    lines = np.repeat(np.eye(SIZE), _BLOCK, axis=0)  # (64, 8): the enlarged unit vectors
    out = x.copy()
    for zoom in factors:
        # zoomed along one axis of 64 pixels, then each block of 8 averaged: the 8x8 matrix of one axis
        m = (_clipped_zoom_matrix(zoom) @ lines).reshape(SIZE, _BLOCK, SIZE).mean(axis=1)
        out += m @ x @ m.T
    return np.clip(out / (len(factors) + 1), 0, 1)


def snow(x, severity, rng):
    loc, scale, zoom, threshold, radius, sigma, keep = [
        (0.1, 0.2, 1, 0.6, 8, 3, 0.8),
        (0.1, 0.2, 1, 0.5, 10, 4, 0.8),
        (0.15, 0.3, 1.75, 0.55, 10, 4, 0.7),
        (0.25, 0.3, 2.25, 0.6, 12, 6, 0.65),
        (0.3, 0.3, 1.25, 0.65, 14, 12, 0.6)][severity - 1]

    def on_large(big):
        flakes = rng.normal(size=big.shape, loc=loc, scale=scale)
        m = _clipped_zoom_matrix(zoom)
        flakes = m @ flakes @ m.T
        flakes[flakes < threshold] = 0
        flakes = np.floor(np.clip(flakes, 0, 1) * 255)  # the 8-bit snow layer handed to ImageMagick
        flakes = _motion_blur(flakes, radius, sigma, rng.uniform(-135, -45, size=len(big))) / 255
        # gray images: cv2's RGB2GRAY is the image itself
        big = keep * big + (1 - keep) * np.maximum(big, big * 1.5 + 0.5)
        return np.clip(big + flakes + np.rot90(flakes, k=2, axes=(1, 2)), 0, 1)

    return _at_large(x, on_large)


def fog(x, severity, rng):
    strength, decay = [(.4, 3), (.7, 3), (1, 2.5), (1.5, 2), (2, 1.75)][severity - 1]

    def on_large(big):
        brightest = big.max(axis=(1, 2), keepdims=True)
        foggy = big + strength * _plasma_fractal(len(big), LARGE, decay, rng)
        return np.clip(foggy * brightest / (brightest + strength), 0, 1)

    return _at_large(x, on_large)


def brightness(x, severity, rng):
    c = [.1, .2, .3, .4, .5][severity - 1]
    return np.clip(x + c, 0, 1)


def contrast(x, severity, rng):
    c = [.4, .3, .2, .1, 0.05][severity - 1]
    means = x.mean(axis=(1, 2), keepdims=True)
    return np.clip((x - means) * c + means, 0, 1)


def pixelate(x, severity, rng):
    c = [0.9, 0.8, 0.7, 0.6, 0.5][severity - 1]
    m = _pixelate_matrix(c)
    return np.clip(m @ x @ m.T, 0, 1)


def _pixelate_matrix(c: float, size: int = SIZE) -> np.ndarray:
    """(size x size) matrix of Pillow's BOX resize to size * c pixels and back along one axis, for a size * c that
    need not be an integer (8 * 0.9 = 7.2): the line, a step function, averaged over cells of width 1 / c centred
    on it (the two outer cells cut at the borders), then every pixel the mean of the cells it overlaps. Where
    size * c divides size (severity 5: 4 cells) this is exactly Pillow's resize there and back. Pillow's int(size * c)
    cells (7, 6, 5, 4, 4) would make severities 4 and 5 one corruption, and 6 aligned cells blur less than 5."""
    cells = math.ceil(size * c - 1e-9)
    edges = np.clip((size - cells / c) / 2 + np.arange(cells + 1) / c, 0, size)
    pixels = np.arange(size)
    overlap = np.clip(np.minimum(edges[1:, None], pixels + 1) - np.maximum(edges[:-1, None], pixels), 0, None)
    return overlap.T @ (overlap / overlap.sum(axis=1, keepdims=True))


def jpeg_compression(x, severity, rng):
    quality = [65, 58, 50, 40, 25][severity - 1]
    out = np.empty_like(x)
    for n, image in enumerate(np.round(x * 255).astype(np.uint8)):
        stream = io.BytesIO()
        Image.fromarray(image).save(stream, "JPEG", quality=quality)
        with Image.open(stream) as decoded:
            out[n] = np.asarray(decoded, dtype=np.float64) / 255
    return out


FUNCTIONS: dict[str, Callable[[np.ndarray, int, np.random.Generator], np.ndarray]] = {
    "gaussian_noise": gaussian_noise, "shot_noise": shot_noise, "impulse_noise": impulse_noise,
    "defocus_blur": defocus_blur, "glass_blur": glass_blur, "motion_blur": motion_blur, "zoom_blur": zoom_blur,
    "snow": snow, "fog": fog, "brightness": brightness, "contrast": contrast, "pixelate": pixelate,
    "jpeg_compression": jpeg_compression,
}
#: The corruptions of digits-c, in Hendrycks' order (all but frost and elastic_transform: see the module docstring).
CORRUPTIONS = tuple(FUNCTIONS)


def corrupt(x: np.ndarray, corruption: str, severity: int, seed: int = SEED) -> np.ndarray:
    """Images (N, 8, 8) in [0, 1] under one corruption and severity, as 8-bit values (uint8, truncated)."""
    if corruption not in FUNCTIONS:
        raise ValueError(f"digits-c has no corruption {corruption!r}; it has {', '.join(CORRUPTIONS)}")
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, got {severity!r}")
    if x.ndim != 3 or x.shape[1:] != (SIZE, SIZE):
        raise ValueError(f"expected images of shape (N, {SIZE}, {SIZE}), got {x.shape}")
    rng = np.random.default_rng([seed, ALL_CORRUPTIONS.index(corruption), severity])
    out = FUNCTIONS[corruption](np.asarray(x, dtype=np.float64), severity, rng)
    return (np.clip(out, 0, 1) * 255).astype(np.uint8)


def build(x: np.ndarray, seed: int = SEED) -> np.ndarray:
    """Every set of digits-c from the clean test images ``x`` (N, 1, 8, 8) in [0, 1]: uint8 of shape
    (len(CORRUPTIONS), len(SEVERITIES), N, 1, 8, 8)."""
    images = np.asarray(x, dtype=np.float64)[:, 0]
    return np.stack([np.stack([corrupt(images, name, severity, seed)[:, None] for severity in SEVERITIES])
                     for name in CORRUPTIONS])


# ------------------------------------------------------------------------------------------ the dataset


@dataset("digits-c")
@dataclass(frozen=True)
class DigitsC(CorruptedTestSets, DatasetSpec):
    """digits-c: the digits test split under 13 of Hendrycks & Dietterich's 15 corruptions, 5 severities each
    (this module says how each is carried over to 8x8 images), the stand-in for Tiny-ImageNet-C at the scales that
    map every run onto digits (config corruption_map). Nothing is downloaded: ``download`` builds it,
    deterministically, into ``digits-c-uint8.npz`` in its folder (a few seconds), stamped with the code's version,
    the seed and a digest of the clean test images; a set that no longer matches them is built again."""


    @property
    def needs_download(self) -> bool:
        return False

    @property
    def corruptions(self) -> tuple[str, ...]:
        return CORRUPTIONS

    def problems(self, folder: Path) -> list[Path]:
        path = self._path(folder)
        return [] if cache_fingerprint(path) == self._fingerprint(self._clean(folder).x_test) else [path]

    def fetch(self, folder: Path) -> None:
        self._arrays(folder)

    def sets(self, root: str | Path, corruptions: Sequence[str], severities: Sequence[int]) -> dict:
        arrays = self._arrays(verified_folder(self, root))
        y = label_tensor(arrays["y"])
        return {(corruption, int(severity)): (unit_float(arrays["x"][self.corruptions.index(corruption),
                                                                     SEVERITIES.index(int(severity))]), y)
                for corruption in corruptions for severity in severities}

    def _arrays(self, folder: Path) -> dict[str, np.ndarray]:
        clean = self._clean(folder)
        return cached(self._path(folder), self._fingerprint(clean.x_test),
                      lambda: {"x": build(clean.x_test.numpy()), "y": clean.y_test.numpy()})

    def _clean(self, folder: Path) -> Data:
        """The clean dataset's data (``load(clean_dataset)`` from this folder's root)."""
        clean = DATASETS[self.clean_dataset]
        return clean.read(verified_folder(clean, folder.parent))

    def _fingerprint(self, x_test: torch.Tensor) -> str:
        digest = hashlib.sha256(x_test.numpy().tobytes()).hexdigest()
        return f"{self.name}|version {VERSION}|seed {SEED}|{','.join(self.corruptions)}|{digest}"

    def _path(self, folder: Path) -> Path:
        return folder / f"{self.name}-uint8.npz"
