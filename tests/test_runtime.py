"""The GPU fast path, exercised on the CPU: bf16 autocast in training, channels_last, evaluation in fp32."""

import contextlib

import pytest
import torch
from helpers import build_attack

from tradeoff import config as cfg
from tradeoff.core.runtime import Runtime
from tradeoff.methods import METHODS
from tradeoff.models import create_model

ROOT = cfg.ROOT
CPU = torch.device("cpu")


def test_from_config_enables_cuda_only_settings_only_on_cuda():
    rt = Runtime.from_config({"device": "cpu", "precision": "bf16", "channels_last": True, "compile": "off"})
    assert (rt.bf16, rt.channels_last, rt.compile) == (False, True, None)  # bf16 is CUDA-only, channels_last not
    assert rt.precision == "fp32"
    with pytest.raises(cfg.ConfigError, match=r"runtime\.precision: must be one of \['fp32', 'bf16'\], got 'fp16'"):
        Runtime.from_config({"device": "cpu", "precision": "fp16"})
    if not torch.cuda.is_available():
        with pytest.raises(cfg.ConfigError, match="no CUDA device"):  # one line from the CLI, exit 2
            Runtime.from_config({"device": "cuda"})


def test_auto_falls_back_to_the_cpu_only_at_the_small_scales(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for scale in ("demo", "smoke", None):  # None: a library call that names no scale
        assert Runtime.from_config({"device": "auto"}, scale).device == CPU
    with pytest.raises(cfg.ConfigError, match=r"runtime.device is 'auto' and no CUDA device is visible .*: at the paper "
                                              r"scale the CPU takes days to weeks per run; run on a GPU node, or put "
                                              r"`runtime: \{device: cpu\}` in an overlay"):
        Runtime.from_config({"device": "auto"}, "paper")
    assert Runtime.from_config({"device": "cpu"}, "paper").device == CPU  # asked for: the user's choice


def _update(run: str, rt: Runtime, x, y):
    catalog = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    spec = catalog.runs[run]
    torch.manual_seed(0)
    method = METHODS[spec.method.name](spec, lambda: create_model("resnet18", 10, in_channels=1, image_size=8), rt)
    method.set_epoch(0)
    before = torch.cat([p.detach().flatten().clone() for p in method.model.parameters()])
    torch.manual_seed(1)
    out = method.train_step(rt.place_batch(x), y)
    assert all(p.dtype == torch.float32 for p in method.model.parameters())
    return out["loss"].item(), torch.cat([p.detach().flatten() for p in method.model.parameters()]) - before


def test_bf16_and_channels_last_change_rounding_not_the_step():
    """One NT step of ResNet-18 under bf16 autocast (CPU autocast here, CUDA in production) moves the weights
    as the fp32 step does; channels_last changes nothing but the memory layout."""
    x, y = torch.rand(8, 1, 8, 8), torch.randint(0, 10, (8,))
    loss32, update32 = _update("cifar10-resnet18-nt", Runtime(CPU), x, y)
    loss16, update16 = _update("cifar10-resnet18-nt", Runtime(CPU, bf16=True), x, y)
    loss_cl, update_cl = _update("cifar10-resnet18-nt", Runtime(CPU, channels_last=True), x, y)
    assert loss16 == pytest.approx(loss32, rel=0.01)
    assert torch.nn.functional.cosine_similarity(update32, update16, dim=0) > 0.85
    # channels_last reorders the fp32 sums (oneDNN may pick another convolution algorithm for it, depending on what
    # ran before in the process): rounding, which ResNet-18's BatchNorm over an 8x8 input's 1x1 maps amplifies
    assert loss_cl == pytest.approx(loss32, rel=1e-4)
    assert torch.nn.functional.cosine_similarity(update32, update_cl, dim=0) > 0.999, \
        torch.nn.functional.cosine_similarity(update32, update_cl, dim=0)


def test_pgd_at_step_in_bf16_keeps_fp32_weights_and_the_threat_model():
    """Under bf16 autocast the training attack still returns fp32 images in the eps-ball and in [0, 1]."""
    x, y = torch.rand(8, 1, 8, 8), torch.randint(0, 10, (8,))
    loss, update = _update("cifar10-resnet18-at-beta1", Runtime(CPU, bf16=True, channels_last=True), x, y)
    assert torch.isfinite(torch.tensor(loss)) and update.abs().sum() > 0
    model = create_model("resnet18", 10, in_channels=1, image_size=8).eval()
    with Runtime(CPU, bf16=True).autocast():
        x_adv = build_attack("pgd", model, eps=0.3, steps=3, seed=0).perturb(x, y)
    assert x_adv.dtype == torch.float32
    assert (x_adv - x).abs().max() <= 0.3 + 1e-6 and x_adv.min() >= 0 and x_adv.max() <= 1


def test_paper_scale_trains_in_fp32_unless_bf16_is_asked_for(monkeypatch):
    """The papers' code trains in fp32 with PyTorch's defaults: so does the paper scale, and bf16 autocast is an
    opt-in (`runtime.precision: bf16`, a line of the README's differences table)."""
    paper = cfg.load_catalog([ROOT / "config" / "config.yaml"])
    assert paper.config["runtime"]["precision"] == "fp32" and "bf16" not in paper.config["runtime"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    on_gpu = {**paper.config["runtime"], "device": "cuda"}
    faithful = Runtime.from_config(on_gpu, "paper")
    assert not faithful.bf16 and isinstance(faithful.autocast(), contextlib.nullcontext)
    opted = Runtime.from_config({**on_gpu, "precision": "bf16"}, "paper")
    assert opted.bf16 and opted.precision == "bf16"
