"""CA-AT Figures 4 and 5 as build targets: the `pretrained:` section wired into training (and only training), the
error that names the key before any job, methods that train the adapters and the head only, model.pt that loads
without the pretrained file, `scale_map.arch` as a mapping, and the smoke-scale miniature built by Snakemake.

The checkpoints here are written by the tests (a tiny torchvision ViT in the miniature's shape); nothing is
downloaded.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import types

import pytest
import torch
import torch.nn.functional as F
import yaml
from helpers import evaluation, results_of, workflow_copy
from methods_support import CPU, method_spec

from tradeoff import config as cfg
from tradeoff.cli import main as cli_main
from tradeoff.data import load_run_data
from tradeoff.evaluation.load import RunModel, load_model
from tradeoff.methods import METHODS
from tradeoff.methods.caat import project_gradient
from tradeoff.models import create_model
from tradeoff.models.adapters import TINY_VIT, AdaptedTransformer, PretrainedError, _vision_transformer, vit_tiny
from tradeoff.training.train import model_factory, train

ROOT = cfg.ROOT
PAPER = [ROOT / "config" / "config.yaml"]
SMOKE = PAPER + [ROOT / "config" / "smoke.yaml"]
FINE_TUNE = "cub200-swin_t_adapter-vanilla-ce-lambda1"  # a Figure 4(a) run; vit_tiny_adapter at the smoke scale


def overlay(tmp_path, name: str = "overlay.yaml", **sections) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(sections))
    return str(path)


def tiny_backbone_checkpoint(path, seed: int = 3, wrapped: bool = True) -> dict[str, torch.Tensor]:
    """A torchvision-layout checkpoint of the miniature's backbone (1-channel digits), every tensor perturbed so that
    a tensor loaded into the wrong place would show; returns the backbone tensors by torchvision key."""
    torch.manual_seed(seed)
    net = _vision_transformer(10, 1, **TINY_VIT)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.1)
    state = {k: v.clone() for k, v in net.state_dict().items()}
    torch.save({"state_dict": state} if wrapped else state, path)
    return {k: v for k, v in state.items() if not k.startswith("heads.")}


def backbone_of(model: AdaptedTransformer) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.net.state_dict().items() if not model.is_trainable_key(k)}


@pytest.fixture()
def smoke_with_checkpoint(tmp_path):
    """The smoke catalog with results in tmp_path and pretrained.vit_tiny_adapter a checkpoint written here."""
    ckpt = tmp_path / "backbone.pth"
    expected = tiny_backbone_checkpoint(ckpt)
    extra = overlay(tmp_path, paths={"results": str(tmp_path / "results"), "data": "data"},
                    pretrained={"vit_tiny_adapter": str(ckpt)})
    return cfg.load_catalog(SMOKE + [extra]), ckpt, expected


# ------------------------------------------------------------------------------------------- configuration


def test_pretrained_path_reaches_the_model_exactly(smoke_with_checkpoint):
    catalog, ckpt, expected = smoke_with_checkpoint
    spec = catalog.runs[FINE_TUNE]
    assert (spec.paper_arch, spec.arch, spec.pretrained.file) == ("swin_t_adapter", "vit_tiny_adapter", str(ckpt))
    assert catalog.pretrained_checkpoint(FINE_TUNE, must_exist=True) == ckpt
    ds = load_run_data(spec, catalog.data_root)
    torch.manual_seed(0)
    model = model_factory(spec, ds)()
    loaded = backbone_of(model)
    assert loaded.keys() == expected.keys()
    assert all(torch.equal(loaded[k], expected[k]) for k in expected)
    # the adapters start as the identity (zero up-projection) and the head is new: not the checkpoint's
    assert all(a.up.weight.abs().sum() == 0 for a in model.adapters())
    assert model.head.out_features == 10
    # runs trained from scratch get no pretrained setting, so their settings (and jobs) are unchanged
    assert catalog.runs["cifar10-resnet18-at-beta1"].pretrained is None
    assert "pretrained" not in catalog.runs["cifar10-resnet18-at-beta1"].as_dict()
    assert catalog.pretrained_checkpoint("cifar10-resnet18-at-beta1") is None


def test_unset_or_missing_checkpoint_names_the_key(tmp_path, capsys):
    work = workflow_copy(tmp_path / "w")  # the CLI works in the workflow's folder: a copy, not the checkout
    config = str(work / "config" / "config.yaml")
    paper = cfg.load_catalog(PAPER)  # the shipped paper scale: pretrained.swin_t_adapter is null
    run = "cub200-swin_t_adapter-vanilla-lambda0"
    assert paper.runs[run].pretrained.file is None  # the catalog itself resolves: other targets are unaffected
    with pytest.raises(cfg.ConfigError, match=re.escape("set `pretrained.swin_t_adapter` in the config")) as info:
        paper.pretrained_checkpoint(run)
    assert "swin_tiny_patch4_window7_224" in str(info.value) and f"runs.{run}" in str(info.value)
    rgb = types.SimpleNamespace(x_train=torch.zeros(1, 3, 32, 32), num_classes=200)  # CUB-200's shape
    with pytest.raises(PretrainedError, match=re.escape("set `pretrained.swin_t_adapter`")):
        model_factory(paper.runs[run], rgb)()
    # `tradeoff train` refuses before any work, with the same message
    assert cli_main(["--config", config, "train", "--run", run]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and "set `pretrained.swin_t_adapter` in the config" in err
    assert not results_of(work, "paper").states(run).exists() and not results_of(work, "paper").model(run).exists()
    # a path that is set but is not a file: the key, the path and what it should be
    missing = tmp_path / "nope.pth"
    extra = overlay(tmp_path, pretrained={"vit_b16_adapter": str(missing)})
    assert cli_main(["--config", config, "--config", extra, "train", "--run",
                     "stanford-dogs-vit_b16_adapter-caat-ce-gamma0_8"]) == 2
    err = capsys.readouterr().err
    assert f"`pretrained.vit_b16_adapter` is '{missing}', which is not a file" in err
    assert "ARES_ViT_base_patch16_224_AT.pth" in err


@pytest.mark.parametrize(("section", "message"), [
    ({"pretrained": {"resnet18": "x.pth"}}, r"pretrained\.resnet18: 'resnet18' is not an architecture that starts "
                                            r"from a pretrained checkpoint; allowed: \['swin_t_adapter'"),
    ({"pretrained": {"vit_b16_adapter": 3}}, r"pretrained\.vit_b16_adapter: 3 is not of type"),
    ({"scale_map": {"arch": {"default": "small_cnn", "swin_t": "vit_tiny_adapter"}}},
     r"scale_map\.arch\.swin_t: unknown architecture 'swin_t' to map"),
    ({"scale_map": {"arch": {"swin_t_adapter": "vit_tiny_adaptor"}}},
     r"scale_map\.arch\.swin_t_adapter: unknown value 'vit_tiny_adaptor'; allowed"),
    ({"scale_map": {"arch": {"default": "resnet50"}}}, r"scale_map\.arch\.default: unknown value 'resnet50'"),
    ({"scale_map": {"arch": "resnet50"}}, r"scale_map\.arch: unknown value 'resnet50'"),
    ({"scale_map": {"arch": ["small_cnn"]}}, r"scale_map\.arch: \['small_cnn'\] is not null, an architecture name"),
])
def test_bad_pretrained_or_arch_map_names_the_key(section, message):
    config = cfg.merge(cfg.load_config(PAPER), section)
    with pytest.raises(cfg.ConfigError, match=message):
        cfg.resolve(config)


def test_scale_map_arch_string_or_mapping():
    config = cfg.load_config(PAPER)
    runs = {"resnet": "cifar10-resnet18-at-beta1", "swin": "cub200-swin_t_adapter-caat-ce-gamma0_8",
            "vit": "stanford-dogs-vit_b16_adapter-caat-ce-gamma0_8"}

    def archs(arch_map):
        catalog = cfg.resolve(cfg.merge(config, {"scale_map": {"arch": arch_map}}))
        return {k: catalog.runs[r].arch for k, r in runs.items()}

    assert archs(None) == {"resnet": "resnet18", "swin": "swin_t_adapter", "vit": "vit_b16_adapter"}
    assert archs("small_cnn") == dict.fromkeys(runs, "small_cnn")  # the string form: every architecture
    assert archs({"swin_t_adapter": "swin_s_adapter"}) == {  # unlisted and no default: kept
        "resnet": "resnet18", "swin": "swin_s_adapter", "vit": "vit_b16_adapter"}
    assert archs({"default": "small_cnn", "vit_b16_adapter": "vit_tiny_adapter"}) == {
        "resnet": "small_cnn", "swin": "small_cnn", "vit": "vit_tiny_adapter"}
    # the smoke and demo scales: adapters become the miniature, its pretraining run keeps vit_tiny, the rest the CNN
    for scale in ("smoke", "demo"):
        catalog = cfg.load_catalog(PAPER + [ROOT / "config" / f"{scale}.yaml"])
        assert catalog.runs["digits-vit_tiny-pgd_at"].arch == "vit_tiny"
        assert catalog.runs[runs["swin"]].arch == catalog.runs[runs["vit"]].arch == "vit_tiny_adapter"
        assert catalog.runs[runs["resnet"]].arch == "small_cnn"
        assert catalog.pretrained_checkpoint(runs["vit"]) == (
            catalog.results / "checkpoints" / "digits-vit_tiny-pgd_at" / "model.pt")
        # Figure 5's ViT collapses onto Figure 4's runs: one training job per method and parameter
        assert catalog.train_id[runs["vit"]] == catalog.train_id[runs["swin"]]


def test_results_placeholder_follows_paths_results(tmp_path):
    extra = overlay(tmp_path, paths={"results": str(tmp_path / "elsewhere"), "data": "data"})
    catalog = cfg.load_catalog(SMOKE + [extra])
    assert catalog.runs[FINE_TUNE].pretrained.file == str(tmp_path / "elsewhere" / "smoke" / "checkpoints" /
                                                          "digits-vit_tiny-pgd_at" / "model.pt")


def test_dvc_stages_depend_on_the_pretraining_run():
    from tradeoff.pipeline.dvc_export import stages as dvc_stages

    files = [str(p) for p in SMOKE]
    catalog = cfg.load_catalog(files)
    stages = dvc_stages(catalog, files, ["caat_figure4", "caat_figure5"])
    pretrain = "results/smoke/checkpoints/digits-vit_tiny-pgd_at/model.pt"
    assert pretrain in stages["train-pgd_at@digits-vit_tiny-pgd_at"]["outs"]  # a template per method
    fine_tunes = [name for name in stages if name.startswith("finetune-") and "adapter" in name]
    assert len(fine_tunes) == 2 and all(pretrain in stages[n]["deps"] for n in fine_tunes)
    assert {n for n in stages if n.startswith("train-")} == {"train-pgd_at@digits-vit_tiny-pgd_at"}
    # at paper scale an unset checkpoint is no dependency (the stage's command refuses, naming the key)
    paper = cfg.load_catalog(PAPER)
    full = dvc_stages(paper, [str(PAPER[0])], ["caat_figure5"])
    deps = full["train-caat@stanford-dogs-vit_b16_adapter-caat-ce-gamma0_8"]["deps"]
    assert deps[-1] == "data/.ready/stanford-dogs" and not any("checkpoints" in d or d.endswith(".pth") for d in deps)


# ------------------------------------------------------------------------------------- training and loading


def adapter_method(name: str, ckpt, **params):
    """Method ``name`` on the miniature (vit_tiny_adapter from ``ckpt``) with plain SGD, momentum and weight decay."""
    spec = method_spec(name, lr=0.5, momentum=0.9, weight_decay=5e-3, eps=0.3, steps=2, **params).replace(
        arch="vit_tiny_adapter")

    def build():
        return create_model("vit_tiny_adapter", 10, in_channels=1, image_size=8, pretrained=str(ckpt))

    torch.manual_seed(0)
    return METHODS[name](spec, build, CPU)


def digit_batches(n: int = 3, size: int = 32):
    catalog = cfg.load_catalog(SMOKE)
    ds = load_run_data(catalog.runs[FINE_TUNE], catalog.data_root)
    return [(ds.x_train[i * size:(i + 1) * size], ds.y_train[i * size:(i + 1) * size]) for i in range(n)]


@pytest.mark.parametrize(("name", "params"), [
    ("vanilla", {"lam": 0.5}),
    ("vanilla", {"lam": 1.0, "track_conflict": True}),
    ("caat", {"gamma": 0.8}),
])
def test_training_moves_adapters_and_head_only(tmp_path, name, params):
    ckpt = tmp_path / "backbone.pth"
    tiny_backbone_checkpoint(ckpt)
    method = adapter_method(name, ckpt, **params)
    model = method.model
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {n for n in dict(model.named_parameters()) if ".adapter." in n or ".heads." in n}
    # the optimizer holds exactly the trainable tensors
    held = {id(p) for group in method.optimizer.param_groups for p in group["params"]}
    assert held == {id(p) for n, p in model.named_parameters() if n in trainable}
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for x, y in digit_batches():
        out = method.train_step(x, y)
        assert torch.isfinite(out["loss"])
    after = model.state_dict()
    for key, value in before.items():
        frozen = ".adapter." not in key and ".heads." not in key
        if frozen:
            assert torch.equal(after[key], value), f"frozen {key} moved"
        else:
            assert not torch.equal(after[key], value), f"trainable {key} did not move"


def test_caat_projects_the_gradients_of_the_trainable_parameters_only(tmp_path):
    """One CA-AT step with plain SGD moves the trainable parameters by exactly -lr g*, g* the projection of the
    adversarial gradient computed over the adapters and the head alone (the frozen backbone's gradients would change
    the cosine and the projection)."""
    ckpt = tmp_path / "backbone.pth"
    tiny_backbone_checkpoint(ckpt)
    method = adapter_method("caat", ckpt, gamma=0.8)
    for group in method.optimizer.param_groups:
        group.update(momentum=0.0, weight_decay=0.0, nesterov=False)
    model = method.model
    (x, y), (x2, y2) = digit_batches(2)
    method.train_step(x2, y2)  # a first step makes the adapters non-zero, so that every trainable tensor has a gradient
    x_adv = (x + 0.3 * torch.randn_like(x).sign()).clamp(0, 1)
    method.adversarial = lambda xb, yb: x_adv  # a fixed adversarial batch, the same for the reference

    reference = copy.deepcopy(model)
    params = [p for p in reference.parameters() if p.requires_grad]
    g_c = torch.cat([g.reshape(-1) for g in torch.autograd.grad(F.cross_entropy(reference(x), y), params)])
    g_a = torch.cat([g.reshape(-1) for g in torch.autograd.grad(F.cross_entropy(reference(x_adv), y), params)])
    assert sum(method.sizes) == g_c.numel() < sum(p.numel() for p in model.parameters()) / 4
    cos = float(torch.dot(g_a, g_c) / (g_a.norm() * g_c.norm()))
    gamma = max(0.8, (cos + 1) / 2)  # above the cosine: the step projects (no conflict would step along g_c)
    method.p = dataclasses.replace(method.p, gamma=gamma)  # the parameters are frozen
    expected = project_gradient(g_a, g_c, gamma)
    assert not torch.allclose(expected, g_c)
    lr = method.optimizer.param_groups[0]["lr"]
    before = [p.detach().clone() for p in params]
    method.train_step(x, y)
    moved = torch.cat([(b - p.detach()).reshape(-1) for b, p in zip(before, (p for p in model.parameters()
                                                                              if p.requires_grad))]) / lr
    torch.testing.assert_close(moved, expected, rtol=1e-4, atol=1e-6)


def test_model_pt_loads_without_the_pretrained_file_and_strictly(smoke_with_checkpoint):
    catalog, ckpt, expected = smoke_with_checkpoint
    run = catalog.train_id[FINE_TUNE]
    spec = catalog.runs[run]
    paths = train(run, spec, results=catalog.results, data_root=catalog.data_root, runtime=CPU, progress=False)
    x = load_run_data(spec, catalog.data_root).x_test[:50]
    model, meta = load_model(RunModel(paths.model))
    with torch.no_grad():
        logits = model(x)
    # the same state in a model built from the pretrained file: the same function
    state = torch.load(paths.model, weights_only=True)["model"]
    rebuilt = create_model("vit_tiny_adapter", 10, in_channels=1, image_size=8, pretrained=str(ckpt))
    rebuilt.load_state_dict(state)
    with torch.no_grad():
        assert torch.equal(rebuilt.eval()(x), logits)
    # without the pretrained file, model.pt alone: identical logits, the backbone the checkpoint's
    os.remove(ckpt)
    again, _ = load_model(RunModel(paths.model))
    with torch.no_grad():
        assert torch.equal(again(x), logits)
    loaded = backbone_of(again)
    assert all(torch.equal(loaded[k], expected[k]) for k in expected)
    assert meta["spec"]["pretrained"] == str(ckpt)
    # strict: a state that lacks a tensor is refused, not completed with random weights
    state.pop("net.encoder.layers.encoder_layer_0.mlp.0.weight")
    broken = catalog.results / "broken.pt"
    torch.save({**torch.load(paths.model, weights_only=True), "model": state}, broken)
    with pytest.raises(RuntimeError, match=re.escape("its weights do not fit its architecture 'vit_tiny_adapter': "
                                                      "missing ['net.encoder.layers.encoder_layer_0.mlp.0.weight']")):
        load_model(RunModel(broken))


def test_the_pretraining_runs_model_pt_is_a_backbone_checkpoint(tmp_path):
    """vit_tiny's model.pt (the demo's pretraining output) loads into vit_tiny_adapter: its backbone exactly, its
    head ignored."""
    torch.manual_seed(1)
    source = vit_tiny(10, 1, 8)
    with torch.no_grad():
        for p in source.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    path = tmp_path / "model.pt"
    torch.save({"model": source.state_dict(), "learners": {}, "learner_snapshots": {}, "meta": "{}"}, path)
    adapted = create_model("vit_tiny_adapter", 10, in_channels=1, image_size=8, pretrained=str(path))
    own = source.net.state_dict()
    assert all(torch.equal(v, own[k]) for k, v in backbone_of(adapted).items())
    assert adapted.head.weight.abs().sum() == 0  # torchvision's zero-initialised head, not the checkpoint's
    # before fine-tuning (identity adapters) the features are the pretrained network's: same logits with its head
    adapted.net.heads.load_state_dict(source.net.heads.state_dict())
    x = torch.rand(4, 1, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(adapted(x), source(x))
    # the bare architecture (for loading a saved state) builds without any file and with random weights
    bare = create_model("vit_tiny_adapter", 10, in_channels=1, image_size=8)
    assert not all(torch.equal(v, own[k]) for k, v in backbone_of(bare).items())


def test_a_backbone_carrying_pickled_code_is_refused_in_one_line_naming_the_file(tmp_path, capsys):
    """The pretrained backbone is read by the one loader (tradeoff.storage.checkpoint.load), as every weights file: a file
    carrying pickled code is refused before anything in it runs, in one line naming the file, never with PyTorch's
    advice to load it with weights_only=False."""
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    evil = tmp_path / "backbone.pth"
    torch.save({"state_dict": {"w": torch.zeros(2)}, "args": Payload()}, evil)
    with pytest.raises(PretrainedError) as info:
        create_model("vit_tiny_adapter", 10, in_channels=1, image_size=8, pretrained=str(evil))
    assert str(info.value) == (f"cannot load checkpoint {evil}: it carries pickled Python objects (posix.system), not "
                               "only tensors: refused, nothing in it was run (a checkpoint of this pipeline holds "
                               "tensors and plain containers only)")
    # `tradeoff train` of a run that fine-tunes it: exit 1, that one line, last
    extra = overlay(tmp_path, paths={"results": str(tmp_path / "results"), "data": str(tmp_path / "data")},
                    pretrained={"vit_tiny_adapter": str(evil)})
    config = [str(f) for f in SMOKE]
    assert cli_main([a for f in config + [extra] for a in ("--config", f)] + ["train", "--run", FINE_TUNE]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == f"tradeoff: PretrainedError: {info.value}", err
    assert "weights_only" not in err and "Traceback" not in err and not marker.exists()


# ------------------------------------------------------------------------------------------ Snakemake


@pytest.mark.slow
def test_paper_scale_dag_names_the_unset_key_only_when_needed(tmp_path):
    from helpers import run

    work = workflow_copy(tmp_path / "wf")
    out = run(["snakemake", "-n", "caat_figure4", "--cores", "1"], work, check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "set `pretrained.swin_t_adapter` in the config" in text
    assert "swin_tiny_patch4_window7_224" in text and not (work / "results").exists()
    ok = run(["snakemake", "-n", "table1a", "--cores", "1"], work)
    assert "rule train" in ok.stdout
    # set, the checkpoint is an input of every fine-tuning job of Figure 4
    ckpt = work / "swin_t.pth"
    ckpt.write_bytes(b"")
    (work / "config" / "swin.yaml").write_text(yaml.safe_dump({"pretrained": {"swin_t_adapter": str(ckpt)}}))
    dry = run(["snakemake", "-n", "caat_figure4", "--cores", "1", "--configfile", "config/swin.yaml"], work)
    # each job's lines run up to the next job's "[date]" line
    jobs = re.findall(r"rule train:\n(.*?)(?=\n\[|\n\n|\Z)", dry.stdout, flags=re.S)
    assert len(jobs) == 24 and all(str(ckpt) in job for job in jobs)


@pytest.mark.slow
def test_snakemake_builds_the_adapter_figures_at_smoke_scale(tmp_path):
    """The miniature end to end: the pretraining run first (its model.pt is the fine-tuning jobs' input), the
    smoke scale's two fine-tuning runs shared by Figure 4(a)-(d) and Figure 5, their evaluations, the figures."""
    from helpers import run

    work = workflow_copy(tmp_path / "wf")
    run(["snakemake", "caat_figure4", "caat_figure5", "--cores", "2", "--configfile", "config/smoke.yaml"], work,
        timeout=900)
    results = work / "results" / "smoke"
    for name in ("caat_figure4a", "caat_figure4b", "caat_figure4c", "caat_figure4d", "caat_figure5"):
        png, pdf = results / "figures" / f"{name}.png", results / "figures" / f"{name}.pdf"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 5000
    trained = sorted(p.name for p in (results / "checkpoints").iterdir())
    assert trained == ["cub200-swin_t_adapter-caat-ce-gamma0_8", "cub200-swin_t_adapter-vanilla-lambda0",
                       "digits-vit_tiny-pgd_at"]
    pretrained = results / "checkpoints" / "digits-vit_tiny-pgd_at" / "model.pt"
    for run_id in trained[:2]:
        model = results / "checkpoints" / run_id / "model.pt"
        assert model.stat().st_mtime > pretrained.stat().st_mtime
        log = (results / "logs" / "train" / f"{run_id}.log").read_text()
        assert "loaded 30 backbone tensors from results/smoke/checkpoints/digits-vit_tiny-pgd_at/model.pt" in log
        meta = json.loads(torch.load(model, weights_only=True)["meta"])
        assert meta["spec"]["arch"] == "vit_tiny_adapter" and meta["spec"]["paper_arch"] == "swin_t_adapter"
        for attack in ("clean", "aa"):
            metrics, _ = evaluation(work, run_id, attack)
            assert 0 <= metrics["accuracy"] <= 1 and metrics["examples"] == 64
