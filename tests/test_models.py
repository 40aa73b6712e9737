"""tradeoff.models: registry, published parameter counts, shapes, BatchNorm modes, memory formats, bf16."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from helpers import env
from torch import nn

from tradeoff.models import MODELS, PRETRAINED_MODELS, create_model, model_names

WIDE = ("wrn-28-10", "wrn-32-10", "wrn-34-10")
# wrn-32-10 is registered with the very builder of wrn-34-10 (test_wrn_32_10_is_wrn_34_10), so the
# per-model tests below run each builder once.
DISTINCT = tuple(name for name in MODELS if name != "wrn-32-10")
BN_MODELS = ("resnet18", "resnet34", "wrn-28-10", "wrn-34-10")
# Global pooling lets the deep networks run on small inputs, which keeps the memory-format tests cheap.
CHEAP_SIZE = {"linear": 32, "small_cnn": 32, "resnet18": 16, "resnet34": 16, "wrn-28-10": 8, "wrn-34-10": 8,
              "vit_tiny": 8}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Batches of one or two gain nothing from intra-op threads, and idle OpenMP workers spinning on a small
    shared CPU made these tests several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_registry():
    assert model_names() == [*MODELS, *PRETRAINED_MODELS]
    assert set(MODELS) == {"linear", "small_cnn", "resnet18", "resnet34", *WIDE, "vit_tiny"}
    assert set(PRETRAINED_MODELS) == {"swin_t_adapter", "swin_s_adapter", "swin_b_adapter", "vit_b16_adapter",
                                      "vit_tiny_adapter"}


def test_the_package_imports_no_torch_until_a_model_name_is_read():
    """``import tradeoff.models.zoo_names`` (a report job's, torch-free) loads no PyTorch; the first name read from
    the package (MODELS here) imports every architecture module, so the registries are complete when used."""
    probe = ("import sys, tradeoff.models, tradeoff.models.zoo_names; assert 'torch' not in sys.modules, 'torch'; "
             "from tradeoff.models import MODELS, PRETRAINED_MODELS; "
             "print(sorted(MODELS), sorted(PRETRAINED_MODELS), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env(), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [*str(sorted(MODELS)).split(), *str(sorted(PRETRAINED_MODELS)).split(), "True"]


def test_an_adapter_model_without_its_checkpoint_is_the_bare_network():
    """create_model(adapter) without ``pretrained``: random weights, every tensor a saved state holds, adapters
    trainable as a fine-tuned one's (what a run's model.pt is loaded into); with one from scratch it is refused."""
    bare = create_model("vit_tiny_adapter", 10, in_channels=1, image_size=8)
    assert len(bare.adapters()) == 2 and not bare.net.conv_proj.weight.requires_grad
    with pytest.raises(ValueError, match="takes no pretrained checkpoint"):
        create_model("small_cnn", 10, pretrained="x.pth")


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="resnet50") as info:
        create_model("resnet50", 10)
    assert all(name in str(info.value) for name in model_names())


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("resnet18", 11_173_962),
        ("resnet34", 21_282_122),
        ("wrn-28-10", 36_479_194),
        ("wrn-34-10", 46_160_474),  # TRADES' WRN-34-10 without its unused sub_block1
        ("small_cnn", 16 * 27 + 2 * 16 + 32 * 16 * 9 + 2 * 32 + 32 * 16 * 16 * 64 + 64 + 64 * 10 + 10),  # + BatchNorms
        ("linear", 3 * 32 * 32 * 10 + 10),
    ],
)
def test_parameter_counts(name, params):
    assert count(create_model(name, 10)) == params


def test_wrn_32_10_is_wrn_34_10():
    assert MODELS["wrn-32-10"] is MODELS["wrn-34-10"]
    assert count(create_model("wrn-32-10", 10)) == 46_160_474


@pytest.mark.parametrize("name", DISTINCT)
def test_forward_shape_32x32(name):
    torch.manual_seed(0)
    model = create_model(name, 10, in_channels=3, image_size=32).eval()
    with torch.no_grad():
        out = model(torch.rand(2, 3, 32, 32))
    assert out.shape == (2, 10) and out.dtype == torch.float32 and torch.isfinite(out).all()


@pytest.mark.parametrize("name", ["small_cnn", "linear", "vit_tiny"])
def test_forward_shape_digits(name):
    model = create_model(name, 10, in_channels=1, image_size=8)
    assert model(torch.rand(5, 1, 8, 8)).shape == (5, 10)


def test_linear_is_an_affine_map_of_the_pixels():
    model = create_model("linear", 2, in_channels=1, image_size=8)
    (layer,) = [m for m in model.modules() if isinstance(m, nn.Linear)]
    x = torch.rand(4, 1, 8, 8)
    torch.testing.assert_close(model(x), x.flatten(1) @ layer.weight.T + layer.bias)


@pytest.mark.parametrize("name", BN_MODELS)
def test_bn_without_running_stats(name):
    model = create_model(name, 10, bn_running_stats=False)
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert norms and all(not m.track_running_stats and m.running_mean is None for m in norms)
    assert not any("running" in key or "num_batches" in key for key in model.state_dict())

    default = create_model(name, 10)
    assert all(m.track_running_stats for m in default.modules() if isinstance(m, nn.BatchNorm2d))
    assert any("running_mean" in key for key in default.state_dict())


def test_bn_without_running_stats_normalises_with_the_batch_in_eval():
    torch.manual_seed(0)
    model = create_model("resnet18", 10, bn_running_stats=False).eval()
    x = torch.rand(4, 3, 16, 16)
    with torch.no_grad():
        alone = model(x[:2])
        together = model(x)[:2]
    assert not torch.allclose(alone, together)


@pytest.mark.parametrize("name", ["linear", "small_cnn", "resnet18", "resnet34"])
def test_backward(name):
    torch.manual_seed(0)
    model = create_model(name, 10)
    x = torch.rand(2, 3, 32, 32, requires_grad=True)
    nn.functional.cross_entropy(model(x), torch.tensor([1, 7])).backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("name", DISTINCT)
def test_channels_last_matches_contiguous(name):
    torch.manual_seed(0)
    size = CHEAP_SIZE[name]
    model = create_model(name, 10, image_size=size).eval()
    x = torch.rand(2, 3, size, size)
    with torch.no_grad():
        reference = model(x)
        model.to(memory_format=torch.channels_last)
        out = model(x.to(memory_format=torch.channels_last))
    torch.testing.assert_close(out, reference, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", DISTINCT)
def test_bf16_autocast_channels_last_training_step(name):
    torch.manual_seed(0)
    size = CHEAP_SIZE[name]
    model = create_model(name, 10, image_size=size).to(memory_format=torch.channels_last)
    x = torch.rand(2, 3, size, size).to(memory_format=torch.channels_last).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
        loss = nn.functional.cross_entropy(out, torch.tensor([3, 4]))
    assert out.shape == (2, 10) and out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    loss.backward()
    assert torch.isfinite(x.grad).all()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())


def test_every_architecture_registered_is_declared_alike():
    """The configuration checks architectures against tradeoff.models.declared without their code: the registries
    hold exactly the declared architectures, in the declared order, the adapter transformers as pretrained ones; an
    undeclared name is refused."""
    from tradeoff.models import MODELS, model_names
    from tradeoff.models.declared import FROM_SCRATCH, PRETRAINED

    assert list(MODELS) == list(FROM_SCRATCH) and list(PRETRAINED_MODELS) == list(PRETRAINED)
    assert model_names() == [*MODELS, *PRETRAINED_MODELS]
    with pytest.raises(TypeError, match="'no-such-net'.*no declaration has the name"):
        MODELS.register(lambda num_classes: None, name="no-such-net")
