"""tradeoff.data.corruptions.nrob on a tiny generated Tiny-ImageNet-C and a model whose every answer is known.

Each corrupted image is a solid red, green or blue square; the model predicts the dominant colour (class 0, 1
or 2). Whether an image is classified correctly is therefore chosen when it is written, with a different
fraction per corruption and severity, and the expected per-corruption means and NROB follow exactly.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image
from test_data_more import TINY_WNIDS, offline, write_tinyimagenet, write_tinyimagenet_c  # noqa: F401
from torch import nn

from tradeoff import data
from tradeoff.data import corruptions

PER_CLASS = 3
COLOURS = ((255, 0, 0), (0, 255, 0), (0, 0, 255))
CLASSES = sorted(TINY_WNIDS)


class DominantColour(nn.Module):
    """Logits = mean of each colour channel: predicts the class of the dominant colour."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))  # so that .train()/.eval() and devices behave as for any model

    def forward(self, x):
        assert x.dtype == torch.float32 and not torch.is_grad_enabled() and not self.training
        return x.mean(dim=(2, 3)) * self.scale


def solid(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 64), colour).save(out, "JPEG", quality=90)
    return out.getvalue()


def correctness() -> dict[tuple[str, int, str, int], bool]:
    """Whether each image (corruption, severity, wnid, index) is written in its own class's colour."""
    rng = np.random.default_rng(7)
    out = {}
    for c, corruption in enumerate(data.CORRUPTIONS):
        for severity in data.SEVERITIES:
            p = (c + 1) / 16 * (6 - severity) / 5  # a different rate for every corruption and severity
            for wnid in CLASSES:
                for i in range(PER_CLASS):
                    out[(corruption, severity, wnid, i)] = bool(rng.random() < p)
    return out


@pytest.fixture
def root(tmp_path, monkeypatch):
    write_tinyimagenet(tmp_path / "tinyimagenet", np.random.default_rng(0), monkeypatch)
    truth = correctness()

    def image(corruption, severity, wnid, i):
        label = CLASSES.index(wnid)
        shown = label if truth[(corruption, severity, wnid, i)] else (label + 1 + i % 2) % 3
        return solid(COLOURS[shown])

    write_tinyimagenet_c(tmp_path / "tinyimagenet-c", np.random.default_rng(0), monkeypatch, image=image,
                         per_class=PER_CLASS)
    data.download("tinyimagenet", tmp_path)
    data.download("tinyimagenet-c", tmp_path)
    return tmp_path, truth


def expected(truth, severities=data.SEVERITIES):
    n = len(CLASSES) * PER_CLASS
    per_severity = {
        corruption: {s: sum(truth[(corruption, s, w, i)] for w in CLASSES for i in range(PER_CLASS)) / n
                     for s in severities}
        for corruption in data.CORRUPTIONS
    }
    per_corruption = {c: float(np.mean(list(accs.values()))) for c, accs in per_severity.items()}
    return per_severity, per_corruption, float(np.mean(list(per_corruption.values())))


def test_nrob_is_the_mean_over_corruptions_of_the_mean_over_severities(root):
    data_root, truth = root
    per_severity, per_corruption, mean = expected(truth)
    assert len(set(per_corruption.values())) > 5  # the rates differ, so a wrong average would show

    model = DominantColour().train()
    result = corruptions.nrob(model, data_root, batch_size=4, device="cpu")  # 4 does not divide the 9 images
    assert model.training  # mode restored
    assert list(result["corruptions"]) == list(data.CORRUPTIONS)
    assert result["severities"] == per_severity
    assert result["corruptions"] == pytest.approx(per_corruption, abs=1e-12)
    assert result["nrob"] == pytest.approx(mean, abs=1e-12)
    # With equal set sizes, the mean of means is the pooled accuracy over all corrupted images.
    assert result["nrob"] == pytest.approx(np.mean(list(truth.values())), abs=1e-12)

    again = corruptions.nrob(model, data_root, batch_size=100, device="cpu")
    assert again == result


def test_nrob_over_chosen_severities(root):
    data_root, truth = root
    per_severity, per_corruption, mean = expected(truth, severities=(3, 5))
    result = corruptions.nrob(DominantColour(), data_root, batch_size=9, device="cpu", severities=(3, 5))
    assert result["severities"] == per_severity
    assert result["nrob"] == pytest.approx(mean, abs=1e-12)


def test_accuracy_is_fp32_under_an_outer_autocast():
    model = DominantColour().eval()
    x = torch.zeros(5, 3, 4, 4)
    x[:, 1] = 1.0
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert corruptions.accuracy(model, x, torch.tensor([1, 1, 0, 1, 2]), batch_size=2, device="cpu") == 0.6
    with pytest.raises(ValueError):
        corruptions.accuracy(model, x[:0], torch.tensor([], dtype=torch.int64), batch_size=2, device="cpu")
