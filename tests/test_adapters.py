"""tradeoff.models.adapters: adapter placement, frozen backbone, checkpoint loading (torchvision and timm layouts).

Tiny randomly initialised Swin and ViT configurations keep the tests fast; the registered Swin-T and ViT-B/16
are built once each. No weights are downloaded: checkpoints are written by the tests. (The timm name mapping was
also checked once against timm 0.6.13 and 1.0.31 themselves: identical logits for Swin-T, 3e-6 for ViT-B/16.)
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tradeoff.models import MODELS, PRETRAINED_MODELS, create_model, model_names
from tradeoff.models.adapters import (
    PRETRAINED,
    AdaptedTransformer,
    BottleneckAdapter,
    PretrainedError,
    load_pretrained,
    swin_adapter,
    vit_adapter,
)
from tradeoff.training.train import model_factory

TINY_SWIN = {"embed_dim": 16, "depths": (2, 2), "num_heads": (2, 4), "window_size": 2, "patch_size": 2,
             "resolution": 16}
TINY_VIT = {"patch_size": 4, "num_layers": 3, "num_heads": 2, "hidden_dim": 16, "mlp_dim": 32, "resolution": 16}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny(family: str, num_classes: int = 5, seed: int = 0, **overrides) -> AdaptedTransformer:
    torch.manual_seed(seed)
    if family == "swin":
        return swin_adapter(num_classes, **{**TINY_SWIN, **overrides})
    return vit_adapter(num_classes, **{**TINY_VIT, **overrides})


def randomise(model: nn.Module, seed: int) -> None:
    """Perturb every tensor (LayerNorms too), so that a tensor loaded into the wrong place would show."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)


def backbone(model: AdaptedTransformer) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.net.state_dict().items() if not model.is_trainable_key(k)}


def trainable(model: AdaptedTransformer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.net.state_dict().items() if model.is_trainable_key(k)}


# Structure ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("family", "blocks", "dims"), [("swin", 4, [16, 16, 32, 32]), ("vit", 3, [16, 16, 16])])
def test_one_adapter_after_each_mlp(family, blocks, dims):
    model = tiny(family)
    adapters = model.adapters()
    assert len(adapters) == blocks
    assert [a.down.in_features for a in adapters] == dims
    assert [a.down.out_features for a in adapters] == [d // 8 for d in dims]  # reduction factor 8
    assert all(isinstance(a.act, nn.ReLU) and a.up.out_features == a.down.in_features for a in adapters)
    mlps = [m.mlp for m in model.net.modules() if hasattr(m, "mlp")]
    assert len(mlps) == blocks and all(list(mlp.children())[-1] is a for mlp, a in zip(mlps, adapters))
    # The adapter acts on the output of the MLP's last linear layer (dropout is 0).
    seen = {}
    linear = [m for m in mlps[0] if isinstance(m, nn.Linear)][-1]
    linear.register_forward_hook(lambda m, i, o: seen.__setitem__("mlp", o))
    adapters[0].register_forward_hook(lambda m, i, o: seen.__setitem__("adapter_in", i[0]))
    model(torch.rand(1, 3, 16, 16))
    assert torch.equal(seen["mlp"], seen["adapter_in"])


def test_adapter_is_the_identity_at_initialisation_and_residual_after():
    adapter = BottleneckAdapter(16)
    h = torch.randn(3, 16)
    assert torch.equal(adapter(h), h)
    with torch.no_grad():
        adapter.up.weight.normal_()
    assert torch.allclose(adapter(h), h + adapter.up(torch.relu(adapter.down(h))))


@pytest.mark.parametrize("family", ["swin", "vit"])
def test_only_adapters_and_head_train(family):
    model = tiny(family)
    names = {name for name, p in model.named_parameters() if p.requires_grad}
    head = "net.head." if family == "swin" else "net.heads.head."
    assert names == {n for n, _ in model.named_parameters() if ".adapter." in n or n.startswith(head)}
    assert {f"{head}weight", f"{head}bias"} <= names
    assert sum(".adapter." in n for n in names) == 4 * len(model.adapters())

    # Once the adapters are not zero, gradients reach exactly the trainable parameters.
    randomise(model, 1)
    x = torch.rand(2, 3, 16, 16, requires_grad=True)
    nn.functional.cross_entropy(model(x), torch.tensor([1, 3])).backward()
    for name, p in model.named_parameters():
        assert (p.grad is not None) == (name in names), name
    assert x.grad is not None and x.grad.abs().sum() > 0  # attacks need input gradients through the frozen net


@pytest.mark.parametrize("family", ["swin", "vit"])
def test_forward_shapes_resizing_and_determinism(family):
    model = tiny(family, num_classes=7).train()
    x = torch.rand(3, 3, 8, 8)  # smaller than the 16 x 16 resolution: resized inside
    out = model(x)
    assert out.shape == (3, 7) and torch.isfinite(out).all()
    assert torch.equal(model(x), out)  # no stochastic depth or dropout, even in train mode
    up = nn.functional.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False)
    assert torch.allclose(model(up), out, atol=1e-6)
    # [0, 1] images are normalised with the ImageNet statistics before the backbone.
    seen = {}
    first = model.net.features[0][0] if family == "swin" else model.net.conv_proj
    first.register_forward_hook(lambda m, i, o: seen.__setitem__("in", i[0]))
    model(up)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    assert torch.allclose(seen["in"], (up - mean) / std)


# Checkpoints ----------------------------------------------------------------------------------------------------
def to_timm(key: str, family: str, old_swin: bool = False) -> str:
    """timm's name of a torchvision key (the inverse of the loader's mapping, written independently)."""
    if family == "vit":
        fixed = {"class_token": "cls_token", "encoder.pos_embedding": "pos_embed"}
        if key in fixed:
            return fixed[key]
        key = re.sub(r"^conv_proj\.", "patch_embed.proj.", key)
        key = re.sub(r"^encoder\.ln\.", "norm.", key)
        key = re.sub(r"^heads\.head\.", "head.", key)
        key = re.sub(r"^encoder\.layers\.encoder_layer_(\d+)\.", r"blocks.\1.", key)
        for old, new in (("ln_1.", "norm1."), ("ln_2.", "norm2."), ("self_attention.in_proj_weight", "attn.qkv.weight"),
                         ("self_attention.in_proj_bias", "attn.qkv.bias"), ("self_attention.out_proj.", "attn.proj."),
                         ("mlp.0.", "mlp.fc1."), ("mlp.3.", "mlp.fc2.")):
            key = key.replace(old, new)
        return key
    if m := re.fullmatch(r"features\.0\.0\.(.+)", key):
        return f"patch_embed.proj.{m[1]}"
    if m := re.fullmatch(r"features\.0\.2\.(.+)", key):
        return f"patch_embed.norm.{m[1]}"
    if m := re.fullmatch(r"features\.(\d+)\.(\d+)\.(.+)", key):
        rest = m[3].replace("mlp.0.", "mlp.fc1.").replace("mlp.3.", "mlp.fc2.")
        return f"layers.{(int(m[1]) - 1) // 2}.blocks.{m[2]}.{rest}"
    if m := re.fullmatch(r"features\.(\d+)\.(reduction|norm)\.(.+)", key):
        stage = int(m[1]) // 2 - (1 if old_swin else 0)
        return f"layers.{stage}.downsample.{m[2]}.{m[3]}"
    if m := re.fullmatch(r"head\.(.+)", key):
        return f"head.{m[1]}" if old_swin else f"head.fc.{m[1]}"
    return key


def timm_checkpoint(model: AdaptedTransformer, old_swin: bool = False) -> dict[str, torch.Tensor]:
    """What ARES would save for this backbone: timm names, an ImageNet head, Swin's buffers in timm's forms."""
    out = {}
    for key, value in model.net.state_dict().items():
        if ".adapter." in key:
            continue
        if key.startswith(model.head_prefix):
            value = torch.randn(1000, *value.shape[1:])  # the ImageNet classifier
        if key.endswith("relative_position_index"):
            if not old_swin:
                continue  # timm >= 0.9 does not save it
            side = int(value.numel() ** 0.5)
            value = value.view(side, side)  # timm < 0.9 saves it as a matrix
        out[to_timm(key, model.family, old_swin)] = value
    if model.family == "swin" and old_swin:
        out["layers.0.blocks.1.attn_mask"] = torch.zeros(4, 4, 4)
    return out


@pytest.mark.parametrize(
    ("family", "layout"),
    [("swin", "torchvision"), ("swin", "timm"), ("swin", "timm<0.9"), ("vit", "torchvision"), ("vit", "timm")],
)
def test_checkpoint_round_trip(family, layout, tmp_path):
    source = tiny(family, seed=0)
    randomise(source, 1)
    if layout == "torchvision":
        # A full state dict of another adapted model, under DataParallel's prefix: its adapters and head are ignored.
        checkpoint = {"state_dict": {f"module.{k}": v for k, v in source.net.state_dict().items()}}
    else:
        state = timm_checkpoint(source, old_swin=layout == "timm<0.9")
        # ARES's wrapper: Sequential(normalisation, timm model), saved as a field "model" of a dict.
        wrapped = {"0.mean": torch.zeros(3), "0.std": torch.ones(3), **{f"1.{k}": v for k, v in state.items()}}
        checkpoint = {"model": wrapped, "epoch": 3}
    path = tmp_path / "pretrained.pth"
    torch.save(checkpoint, path)

    target = tiny(family, seed=5)
    before = trainable(target)
    report = load_pretrained(target, path)
    assert report.layout == ("torchvision" if layout == "torchvision" else "timm")
    expected = backbone(source)
    loaded = backbone(target)
    assert loaded.keys() == expected.keys()
    assert all(torch.equal(loaded[k], expected[k]) for k in expected)
    after = trainable(target)
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)  # kept as built
    assert set(report.kept) >= set(before) and not set(report.loaded) & set(before)
    assert any("head" in key for key in report.ignored)
    if layout != "torchvision":
        assert {"0.mean", "0.std"} <= set(report.ignored)  # keys inside checkpoint["model"]
    assert all(p.requires_grad == target.is_trainable_key(n) for n, p in target.net.named_parameters())

    # With the same adapters and head, the two models compute the same function.
    target.load_state_dict(source.state_dict())
    x = torch.rand(2, 3, 16, 16)
    assert torch.allclose(target(x), source(x), atol=1e-6)


def test_checkpoint_that_does_not_fit_is_refused_and_nothing_loaded(tmp_path):
    target = tiny("swin", seed=0)
    untouched = {k: v.clone() for k, v in target.state_dict().items()}
    cases = {
        "deeper": (tiny("swin", seed=1, depths=(2, 3)), "unexpected tensors: features.3.2."),
        "shallower": (tiny("swin", seed=1, depths=(2, 1)), "backbone tensors missing: features.3.1."),
        "wider": (tiny("swin", seed=1, embed_dim=24, num_heads=(2, 4)), "with another shape"),
    }
    for name, (other, message) in cases.items():
        path = tmp_path / f"{name}.pth"
        torch.save(timm_checkpoint(other), path)
        with pytest.raises(PretrainedError, match=re.escape(message)) as info:
            load_pretrained(target, path)
        assert "nothing was loaded" in str(info.value)
    torch.save(timm_checkpoint(tiny("vit")), tmp_path / "vit.pth")
    with pytest.raises(PretrainedError, match="does not fit this swin backbone"):
        load_pretrained(target, tmp_path / "vit.pth")  # a ViT has no Swin stages
    torch.save({"layer.weight": torch.zeros(2)}, tmp_path / "other.pth")
    with pytest.raises(PretrainedError, match="no swin backbone found"):
        load_pretrained(target, tmp_path / "other.pth")
    assert all(torch.equal(v, untouched[k]) for k, v in target.state_dict().items())


class NotATensor:
    pass


def test_checkpoint_is_read_weights_only(tmp_path):
    path = tmp_path / "pickle.pth"
    torch.save({"state_dict": NotATensor()}, path)
    with pytest.raises(PretrainedError, match=r"cannot load checkpoint .*pickle\.pth: it carries pickled Python objects "
                                              r"\(test_adapters\.NotATensor\)"):
        load_pretrained(tiny("vit"), path)
    with pytest.raises(PretrainedError, match="does not exist"):
        load_pretrained(tiny("vit"), tmp_path / "missing.pth")


# Registry -------------------------------------------------------------------------------------------------------
def test_registry_names_and_pretrained_keyword():
    assert list(PRETRAINED_MODELS) == ["swin_t_adapter", "swin_s_adapter", "swin_b_adapter", "vit_b16_adapter",
                                       "vit_tiny_adapter"]
    assert model_names() == [*MODELS, *PRETRAINED_MODELS]
    with pytest.raises(ValueError, match="takes no pretrained checkpoint"):
        create_model("resnet18", 10, pretrained="x.pth")


@pytest.mark.parametrize(("name", "expected_file"), [
    ("swin_t_adapter", "swin_tiny_patch4_window7_224"),
    ("swin_s_adapter", "ARES_Swin_small_patch4_window7_224_AT.pth"),
    ("vit_b16_adapter", "ARES_ViT_base_patch16_224_AT.pth"),
])
def test_missing_checkpoint_names_the_config_key_and_the_file(name, expected_file, tmp_path):
    # training's builder (no checkpoint configured: the spec's backbone_file None or empty), and create_model given
    # an empty path; create_model without ``pretrained`` builds the bare network a saved state is loaded into
    spec = SimpleNamespace(arch=name, bn_running_stats=True)
    data = SimpleNamespace(x_train=torch.zeros(1, 3, 224, 224), num_classes=10)
    builds = [model_factory(SimpleNamespace(**vars(spec), backbone_file=file), data) for file in (None, "")]
    for build in [*builds, lambda: create_model(name, 10, image_size=224, pretrained="")]:
        with pytest.raises(PretrainedError, match=re.escape(f"set `pretrained.{name}` in the config")) as info:
            build()
        assert expected_file in str(info.value) and "never starts from random weights" in str(info.value)
    with pytest.raises(PretrainedError, match=re.escape(f"`pretrained.{name}` is '{tmp_path / 'nope.pth'}'")):
        create_model(name, 10, pretrained=str(tmp_path / "nope.pth"))
    with pytest.raises(ValueError, match="RGB"):
        create_model(name, 10, in_channels=1, pretrained=str(tmp_path / "nope.pth"))


def adapter_params(dim: int) -> int:
    return 2 * dim * (dim // 8) + dim // 8 + dim  # down (weight, bias) and up (weight, bias)


@pytest.mark.parametrize(("name", "blocks", "trainable_params"), [
    ("swin_t_adapter", 12, 2 * adapter_params(96) + 2 * adapter_params(192) + 6 * adapter_params(384)
     + 2 * adapter_params(768) + 768 * 10 + 10),
    ("vit_b16_adapter", 12, 12 * adapter_params(768) + 768 * 10 + 10),
])
def test_registered_architectures_from_a_checkpoint(name, blocks, trainable_params, tmp_path):
    spec = PRETRAINED[name]
    torch.manual_seed(0)
    source = (swin_adapter if spec.family == "swin" else vit_adapter)(10, **spec.config)
    path = tmp_path / f"{name}.pth"
    torch.save(timm_checkpoint(source), path)
    model = create_model(name, 10, in_channels=3, image_size=32, pretrained=str(path))
    assert isinstance(model, AdaptedTransformer) and len(model.adapters()) == blocks
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == trainable_params
    assert all(torch.equal(v, backbone(source)[k]) for k, v in backbone(model).items())
    with torch.no_grad():
        assert model.eval()(torch.rand(1, 3, 32, 32)).shape == (1, 10)  # CIFAR-sized input, resized to 224
