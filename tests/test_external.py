"""External models (tradeoff.evaluation.external, the config's `external:`) and RobustBench's formats (tradeoff.report.robustbench).

Checkpoints are written by the tests, outside any pipeline: plain state dicts of the smoke scale's small CNN and of a
ResNet-18, a RobustBench model-zoo file (its WideResNet with `sub_block1` and DataParallel's prefix under
`state_dict`; its ResNet-18 with `mu`/`sigma` normalisation buffers), torchvision's and timm's names, a pickled
payload. They are evaluated through the CLI with a table's suite (and the default suite), their metrics vouched for
by a report, exported as RobustBench model-info JSON checked against RobustBench's own fields; Snakemake builds a
table with an external row at the smoke scale (slow).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import torch
from helpers import data_root, results_of, run, workflow_copy
from report_fixtures import write_measurement

from tradeoff import cli as tcli
from tradeoff import config as tcfg
from tradeoff import data, models
from tradeoff.core.spec import ExternalSpec
from tradeoff.evaluation.external import Normalized
from tradeoff.evaluation.load import ExternalCheckpoint, load_model
from tradeoff.models import zoo_names as zoo
from tradeoff.storage.atomic import sha256_file
from tradeoff.storage.checkpoint import CheckpointError

SMOKE = ("config/config.yaml", "config/smoke.yaml")
NT = "cifar10-resnet18-nt"


def _workflow(tmp_path: Path, overlay: str = "") -> tuple[Path, list[str]]:
    """A workflow copy at the smoke scale reading the session's data, with an overlay (config/ext.yaml)."""
    work = workflow_copy(tmp_path / "w")
    (work / "config" / "ext.yaml").write_text(f"paths: {{data: {data_root()}}}\n" + overlay)
    return work, [a for f in (*SMOKE, "config/ext.yaml") for a in ("--config", f)]


def _cli(work: Path, configs: list[str], monkeypatch, *args: str) -> int:
    monkeypatch.chdir(work)
    return tcli.main(configs + list(args))


def _model(arch: str, seed: int, channels: int = 1, size: int = 8, classes: int = 10):
    torch.manual_seed(seed)
    model = models.create_model(arch, classes, in_channels=channels, image_size=size)
    with torch.no_grad():  # BatchNorm statistics that are not the initial ones, so that they must be loaded
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 1.5)
    return model.eval()


def _clean_accuracy(model, n: int = 64) -> float:
    """The model's accuracy on the smoke scale's digits test examples, computed here."""
    ds = data.load("digits", data_root())
    x, y = data.subset(ds.x_test, ds.y_test, n)
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def _spec(arch: str, dataset: str = "cifar10", **settings) -> ExternalSpec:
    """An external model's resolved settings (an external checkpoint's load reads arch, dataset, normalize, format and sha256)."""
    return ExternalSpec.from_dict({"checkpoint": "unread.pt", "sha256": None, "arch": arch, "dataset": dataset,
                                   "paper_dataset": dataset, "paper_arch": arch, "normalize": None, "format": "auto",
                                   **settings})


def _stderr_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err and err[-1].startswith("tradeoff:") and not any("Traceback" in line for line in err), err
    return err[-1]


# ------------------------------------------------------------------------------ evaluate --checkpoint


def test_plain_state_dicts_are_evaluated_with_a_tables_suite_and_the_default_suite(tmp_path, monkeypatch):
    """The smoke scale's small CNN under Table 1(a)'s suite, a ResNet-18 under the default one (clean and AutoAttack
    at the standard budget): every evaluation's files where an external model's go, the record naming the file by
    its SHA-256, and the clean accuracy that the saved model itself has."""
    work, configs = _workflow(tmp_path)
    small, resnet = _model("small_cnn", 1), _model("resnet18", 2)
    torch.save(small.state_dict(), tmp_path / "small.pt")
    torch.save(resnet.state_dict(), tmp_path / "resnet.pt")
    layout = results_of(work)

    assert _cli(work, configs, monkeypatch, "evaluate", "--checkpoint", str(tmp_path / "small.pt"), "--arch",
                "small_cnn", "--dataset", "digits", "--suite", "table1a") == 0
    catalog = tcfg.load_catalog([work / f for f in (*SMOKE, "config/ext.yaml")])
    suite = catalog.target_attacks("table1a", NT)
    assert {"clean", "pgd20", "aa"} <= set(suite)
    for attack in suite:
        record = json.loads(layout.metrics("small", attack).read_text())
        assert record["run"] == "small" and record["attack"] == attack and record["arch"] == "small_cnn"
        assert record["external"]["sha256"] == sha256_file(tmp_path / "small.pt")
        assert record["external"]["layout"] == "plain" and record["external"]["normalize"] is None
        assert record["spec"] == json.loads(json.dumps(catalog.attack_for(attack, NT).as_dict()))  # the run rows' budgets
        assert layout.predictions("small", attack).exists()
    clean = json.loads(layout.metrics("small", "clean").read_text())
    assert clean["accuracy"] == pytest.approx(_clean_accuracy(small)) and clean["examples"] == 64

    assert _cli(work, configs, monkeypatch, "evaluate", "--checkpoint", str(tmp_path / "resnet.pt"), "--arch",
                "resnet18", "--dataset", "digits", "--name", "r18") == 0
    assert sorted(p.name for p in (layout.root / "metrics" / "r18").iterdir() if not layout.is_sidecar(p)) == \
        ["aa.json", "clean.json"]
    aa = json.loads(layout.metrics("r18", "aa").read_text())
    assert aa["type"] == "autoattack" and aa["eps"] == pytest.approx(0.3)  # digits' standard L-inf budget
    assert set(aa["breakdown"]) == {"apgd-ce", "apgd-t", "fab-t", "square"}
    assert aa["clean_accuracy"] == pytest.approx(_clean_accuracy(resnet))

    # its RobustBench JSON, from those metrics files alone (the model is in no config: its settings are rebuilt from
    # its records, and must resolve to the digest they name)
    out = tmp_path / "r18.json"
    assert _cli(work, configs, monkeypatch, "export", "robustbench", "--run", "r18", "--out", str(out)) == 0
    info = json.loads(out.read_text())
    assert info["clean_acc"] == str(round(aa["clean_accuracy"] * 100, 2)) and info["architecture"] == "ResNet-18"
    assert info["autoattack_acc"] == str(round(aa["accuracy"] * 100, 2)) and info["provenance"]["external"] is True
    metrics = layout.metrics("r18", "aa")
    metrics.write_text(metrics.read_text().replace(aa["spec_digest"], "0" * 16))  # not what clean.json measured
    assert _cli(work, configs, monkeypatch, "export", "robustbench", "--run", "r18", "--out", str(out)) == 1
    (layout.metrics("r18", "clean")).write_text(metrics.read_text())  # no record fits: an unknown model
    assert _cli(work, configs, monkeypatch, "export", "robustbench", "--run", "r18", "--out", str(out)) == 2

    # a catalog id is the catalog's: refused, as are options that belong to --checkpoint without it
    assert _cli(work, configs, monkeypatch, "evaluate", "--checkpoint", str(tmp_path / "small.pt"), "--arch",
                "small_cnn", "--dataset", "digits", "--name", NT) == 2
    assert _cli(work, configs, monkeypatch, "evaluate", "--run", NT, "--attack", "clean", "--arch", "resnet18") == 2


def test_unknown_architecture_or_dataset_says_what_was_meant(tmp_path, monkeypatch, capsys):
    work, configs = _workflow(tmp_path)
    torch.save(_model("small_cnn", 0).state_dict(), tmp_path / "m.pt")
    assert _cli(work, configs, monkeypatch, "evaluate", "--checkpoint", str(tmp_path / "m.pt"), "--arch", "resnet19",
                "--dataset", "digits") == 2
    assert "--arch: unknown architecture 'resnet19'; did you mean 'resnet18'" in _stderr_line(capsys)
    assert _cli(work, configs, monkeypatch, "evaluate", "--checkpoint", str(tmp_path / "m.pt"), "--arch", "small_cnn",
                "--dataset", "digitz") == 2
    assert "--dataset: unknown dataset 'digitz'; did you mean 'digits'?" in _stderr_line(capsys)
    assert _cli(work, configs, monkeypatch, "evaluate", "--checkpoint", str(tmp_path / "m.pt"), "--arch", "small_cnn",
                "--dataset", "digits", "--suite", "tabel1a") == 2
    assert "--suite: unknown target 'tabel1a'; did you mean 'table1a'" in _stderr_line(capsys)
    assert _cli(work, configs, monkeypatch, "evaluate", "--checkpoint", str(tmp_path / "m.pt"), "--arch", "small_cnn",
                "--dataset", "digits", "--normalize", "0.5,x") == 2
    assert "--normalize: expected MEAN,STD" in _stderr_line(capsys)
    assert _cli(work, configs, monkeypatch, "evaluate", "--checkpoint", str(tmp_path / "m.pt"), "--arch", "wrn-34-10",
                "--dataset", "digits", "--format", "timm") == 2
    assert "--format: architecture 'wrn-34-10' is not read in the timm layout; it accepts plain, robustbench" in \
           _stderr_line(capsys)


def test_missing_and_unexpected_keys_are_named_in_one_line(tmp_path, monkeypatch, capsys):
    work, configs = _workflow(tmp_path)
    state = _model("small_cnn", 0).state_dict()
    del state["classifier.2.bias"]
    state["classifier.3.weight"] = torch.zeros(3)
    torch.save(state, tmp_path / "m.pt")
    assert _cli(work, configs, monkeypatch, "evaluate", "--checkpoint", str(tmp_path / "m.pt"), "--arch", "small_cnn",
                "--dataset", "digits") == 1
    line = _stderr_line(capsys)
    assert "its weights do not fit architecture 'small_cnn'" in line
    assert "missing [classifier.2.bias]" in line and "unexpected [classifier.3.weight]" in line
    assert not (results_of(work).root / "metrics" / "m").exists()


def test_a_checkpoint_carrying_pickled_code_is_refused_and_never_run(tmp_path, monkeypatch, capsys):
    work, configs = _workflow(tmp_path)
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"state_dict": _model("small_cnn", 0).state_dict(), "args": Payload()}, tmp_path / "evil.pt")
    assert _cli(work, configs, monkeypatch, "evaluate", "--checkpoint", str(tmp_path / "evil.pt"), "--arch",
                "small_cnn", "--dataset", "digits") == 1
    line = _stderr_line(capsys)
    assert "it carries pickled Python objects (posix.system), not only tensors: refused, nothing in it was run" in line
    assert "weights_only" not in line and not marker.exists()


# ------------------------------------------------------------------------------------------- layouts


def _logits(model, x):
    with torch.no_grad():
        return model(x)


def test_resnet18_in_torchvisions_and_timms_names_and_an_imagenet_stem_refused(tmp_path):
    source = _model("resnet18", 3, channels=3, size=32)
    x = torch.rand(4, 3, 32, 32)

    def renamed(key):  # torchvision's (and timm's) ResNet names, under DataParallel's prefix
        return "module." + key.replace("linear.", "fc.").replace(".shortcut.", ".downsample.")

    torch.save({"model_state_dict": {renamed(k): v for k, v in source.state_dict().items()}, "epoch": 3},
               tmp_path / "tv.pt")
    model, meta = load_model(ExternalCheckpoint(tmp_path / "tv.pt", _spec("resnet18")))
    assert meta["external"]["layout"] == "torchvision"
    assert torch.allclose(_logits(model, x), _logits(source, x))
    model, meta = load_model(ExternalCheckpoint(tmp_path / "tv.pt", _spec("resnet18", format="timm")))
    assert meta["external"]["layout"] == "timm"
    with pytest.raises(CheckpointError, match=r"read in the plain layout\): missing \[layer2\.0\.shortcut\.0\.weight, .*"
                                              r"\(17 in all\)\]; unexpected \[fc\.bias, fc\.weight, "
                                              r"layer2\.0\.downsample\.0\.weight, .* \(20 in all\)\]$"):
        load_model(ExternalCheckpoint(tmp_path / "tv.pt", _spec("resnet18", format="plain")))

    imagenet = {renamed(k): v for k, v in source.state_dict().items()}
    imagenet["module.conv1.weight"] = torch.zeros(64, 3, 7, 7)  # torchvision's ImageNet stem
    torch.save(imagenet, tmp_path / "imagenet.pt")
    with pytest.raises(CheckpointError, match=r"of another shape \[conv1\.weight \(64, 3, 7, 7\) in the file, "
                                              r"\(64, 3, 3, 3\) here\]"):
        load_model(ExternalCheckpoint(tmp_path / "imagenet.pt", _spec("resnet18")))


def test_a_robustbench_model_zoo_file(tmp_path):
    """RobustBench's files as its load_model reads them (robustbench/utils.py): the tensors under 'state_dict' with
    DataParallel's 'module.' (and its 'model.') prefix; its WideResNet(sub_block1=True) (Carmon2019Unlabeled,
    Zhang2019Theoretically in robustbench/model_zoo/cifar10.py) with the unused sub_block1; a model normalising its
    input with 'mu'/'sigma' buffers (e.g. Modas2021PRIMEResNet18)."""
    x = torch.rand(2, 3, 32, 32)
    wrn = _model("wrn-28-10", 4, channels=3, size=32)
    state = {f"module.{k}": v for k, v in wrn.state_dict().items()}
    state.update({f"module.sub_block1.{k[len('block1.'):]}": v.clone() for k, v in wrn.state_dict().items()
                  if k.startswith("block1.")})
    torch.save({"state_dict": state}, tmp_path / "Carmon2019Unlabeled.pt")
    model, meta = load_model(ExternalCheckpoint(tmp_path / "Carmon2019Unlabeled.pt", _spec("wrn-28-10")))
    assert meta["external"]["layout"] == "robustbench"
    assert torch.allclose(_logits(model, x), _logits(wrn, x), atol=1e-5)
    with pytest.raises(CheckpointError, match=r"unexpected \[sub_block1\.layer\.0\.bn1\.bias"):
        load_model(ExternalCheckpoint(tmp_path / "Carmon2019Unlabeled.pt", _spec("wrn-28-10", format="plain")))

    resnet = _model("resnet18", 5, channels=3, size=32)
    mu, sigma = torch.tensor([0.5, 0.5, 0.5]).view(1, 3, 1, 1), torch.tensor([0.25, 0.5, 0.5]).view(1, 3, 1, 1)
    state = {f"module.model.{k}": v for k, v in resnet.state_dict().items()} | {"module.mu": mu, "module.sigma": sigma}
    torch.save({"state_dict": state}, tmp_path / "rb18.pt")
    model, meta = load_model(ExternalCheckpoint(tmp_path / "rb18.pt", _spec("resnet18")))
    assert meta["external"]["layout"] == "robustbench" and meta["external"]["normalize_from"] == "file"
    assert isinstance(model, Normalized) and meta["external"]["normalize"] == {"mean": [0.5] * 3,
                                                                                "std": [0.25, 0.5, 0.5]}
    assert torch.allclose(_logits(model, x), _logits(resnet, (x - mu) / sigma), atol=1e-5)
    same = zoo.parse_normalize("0.5,0.5,0.5,0.25,0.5,0.5", 3, "--normalize")
    same_spec = _spec("resnet18", normalize=same)
    assert load_model(ExternalCheckpoint(tmp_path / "rb18.pt", same_spec))[1]["external"]["normalize"] == same
    other = zoo.parse_normalize("cifar10", 3, "n")
    with pytest.raises(CheckpointError, match=r"the file carries its model's input normalisation"):
        load_model(ExternalCheckpoint(tmp_path / "rb18.pt", _spec("resnet18", normalize=other)))


def test_vit_tiny_in_timms_and_torchvisions_names(tmp_path):
    from test_adapters import to_timm

    source = _model("vit_tiny", 6)
    x = torch.rand(3, 1, 8, 8)
    backbone = {k[len("net."):]: v for k, v in source.state_dict().items()}
    torch.save({to_timm(k, "vit"): v for k, v in backbone.items()}, tmp_path / "timm.pt")
    torch.save(backbone, tmp_path / "tv.pt")
    for name, layout in (("timm.pt", "timm"), ("tv.pt", "torchvision")):
        model, meta = load_model(ExternalCheckpoint(tmp_path / name, _spec("vit_tiny", "digits")))
        assert meta["external"]["layout"] == layout
        assert torch.allclose(_logits(model, x), _logits(source, x), atol=1e-6)


def test_normalisation_is_inside_the_model_and_a_pinned_digest_is_checked(tmp_path):
    assert zoo.parse_normalize("0.5,0.25", 3, "k") == {"mean": [0.5] * 3, "std": [0.25] * 3}
    assert zoo.parse_normalize({"mean": [0.1, 0.2, 0.3], "std": 0.5}, 3, "k") == {"mean": [0.1, 0.2, 0.3],
                                                                                 "std": [0.5] * 3}
    assert zoo.parse_normalize("imagenet", 3, "k")["std"] == [0.229, 0.224, 0.225]
    for bad, message in (("0.5,0.2,0.1", "as many standard deviations as means"), ("0.5,0", "must be > 0"),
                         ("1,2,3,4", "one number or 3")):
        with pytest.raises(tcfg.ConfigError, match=message):
            zoo.parse_normalize(bad, 3, "k")
    source = _model("small_cnn", 7)
    torch.save(source.state_dict(), tmp_path / "m.pt")
    normalize = zoo.parse_normalize("0.5,0.25", 1, "k")
    model, _ = load_model(ExternalCheckpoint(tmp_path / "m.pt", _spec("small_cnn", "digits", normalize=normalize)))
    x = torch.rand(5, 1, 8, 8)  # attacks give [0, 1] images: the model normalises them itself
    assert torch.allclose(_logits(model, x), _logits(source, (x - 0.5) / 0.25))
    with pytest.raises(CheckpointError, match=r"its SHA-256 is [0-9a-f]{64}, not the 0{64} that its settings pin"):
        load_model(ExternalCheckpoint(tmp_path / "m.pt", _spec("small_cnn", "digits", sha256="0" * 64)))


# --------------------------------------------------------------------------------------------- catalog


EXTERNAL = """
external:
  mine: {{checkpoint: {checkpoint}, arch: small_cnn, dataset: digits, paper_dataset: cifar10{extra}}}
targets:
  exttable:
    kind: table
    title: An external model beside a run
    columns: {{nat: clean, aa: aa}}
    rows:
      - {{key: nt, run: cifar10-resnet18-nt}}
      - {{key: mine, external: mine, label: my model}}
"""


def _catalog_with(tmp_path: Path, text: str):
    path = tmp_path / "overlay.yaml"
    path.write_text(text)
    return tcfg.load_catalog([tcfg.DEFAULT_CONFIG, tcfg.ROOT / "config" / "smoke.yaml", path])


def test_the_external_section_and_rows_that_name_it(tmp_path):
    catalog = _catalog_with(tmp_path, EXTERNAL.format(checkpoint="models/mine.pt", extra=", normalize: '0.5,0.25'"))
    spec = catalog.externals["mine"]
    assert spec.as_dict() == {"checkpoint": "models/mine.pt", "sha256": None, "arch": "small_cnn",
                              "dataset": "digits", "paper_dataset": "cifar10", "paper_arch": "small_cnn",
                              "normalize": {"mean": [0.5], "std": [0.25]}, "format": "auto", "test_examples": 64}
    rows = catalog.targets["exttable"].rows
    assert rows[1].as_dict() == {"key": "mine", "external": "mine", "run": "mine", "label": "my model"}
    assert ("mine", "aa") in catalog.evaluations("exttable") and catalog.train_id["mine"] == "mine"
    assert catalog.attack_for("aa", "mine") == catalog.attack_for("aa", NT)  # paper_dataset: the runs' budgets
    assert catalog.evaluation_inputs("mine") == ["models/mine.pt", str(Path(catalog.data_root) / ".ready" / "digits")]
    assert "mine" in catalog.evaluated_models() and "mine" not in catalog.training_runs()


def test_check_config_counts_the_external_models(tmp_path, monkeypatch, capsys):
    work, configs = _workflow(tmp_path, EXTERNAL.format(checkpoint="models/mine.pt", extra=""))
    assert _cli(work, configs, monkeypatch, "check-config") == 0
    assert "1 external models, " in capsys.readouterr().out


def test_dvc_evaluates_an_external_row_from_its_checkpoint(tmp_path):
    """DVC's jobs hold the external model's evaluation (reading its checkpoint and its dataset's marker, with its
    settings in the digest) and no training job for it, as Snakemake's DAG does."""
    from tradeoff.pipeline import dvc_export as dvc

    catalog = _catalog_with(tmp_path, EXTERNAL.format(checkpoint="models/mine.pt", extra=""))
    items = dvc.jobs(catalog, ["exttable"])
    mine = {k: v for k, v in items["evaluate"].items() if v["run"] == "mine"}
    assert mine and all(v["model"] == "models/mine.pt" and v["data"].endswith("/.ready/digits") for v in mine.values())
    assert "mine" not in items.get("train", {}) and "digits" in items["download"]
    nt = next(v for v in items["evaluate"].values() if v["run"] == NT)
    assert nt["model"] == str(catalog.layout.model(NT))
    moved = _catalog_with(tmp_path, EXTERNAL.format(checkpoint="models/mine.pt", extra=", normalize: '0.5,0.25'"))
    assert {k: v["settings"] for k, v in dvc.jobs(moved, ["exttable"])["evaluate"].items() if v["run"] == "mine"} != {
        k: v["settings"] for k, v in mine.items()}  # the model's settings are the job's: DVC re-runs it
    assert "${item.model}" in dvc.render_dvc(catalog, [str(tcfg.DEFAULT_CONFIG)], ["exttable"])["dvc.yaml"]


@pytest.mark.parametrize(("text", "message"), [
    (EXTERNAL.replace("external: mine,", "external: mien,"),
     r"targets\.exttable\.rows\[1\]\.external: unknown external model 'mien'; did you mean 'mine'\?"),
    (EXTERNAL.replace("external: mine,", "run: mine,"),
     r"targets\.exttable\.rows\[1\]\.run: 'mine' is an external model \(`external:`\), not a run: write "
     r"`external: mine`"),
    (EXTERNAL.replace("external: mine,", "external: mine, run: cifar10-resnet18-nt,"),
     r"targets\.exttable\.rows\[1\]: give `run` \(a run of the catalog\) or `external`"),
    (EXTERNAL.replace("  mine: {", "  cifar10-resnet18-nt: {").replace("external: mine,", "external: cifar10-resnet18-nt,"),
     r"external\.cifar10-resnet18-nt: the id is a run's too"),
    (EXTERNAL.replace("arch: small_cnn", "arch: smal_cnn"),
     r"external\.mine\.arch: unknown architecture 'smal_cnn'; did you mean 'small_cnn'\?"),
    (EXTERNAL.replace("dataset: digits,", "dataset: cifar11,"),
     r"external\.mine\.dataset: unknown dataset 'cifar11'; did you mean"),
    (EXTERNAL.replace("{checkpoint}", "m.pt, format: torchvision"),
     r"external\.mine\.format: architecture 'small_cnn' is not read in the torchvision layout"),
    (EXTERNAL.replace("{extra}", ", sha256: abc"), r"external\.mine\.sha256: .*does not match"),
    (EXTERNAL.replace("{extra}", ", normalize: '0.5,0.2,0.1,0.1'"), r"external\.mine\.normalize: .* one number or 1"),
    (EXTERNAL + "  extcurves:\n    kind: figure\n    plot: curves\n    curve_columns: [train_acc]\n    rows:\n"
                "      - {{key: mine, external: mine}}\n",
     r"targets\.extcurves\.rows\[0\]\.external: 'mine' is an external model: a figure that draws the training curves"),
])
def test_the_external_section_is_checked_naming_the_key(tmp_path, text, message):
    with pytest.raises(tcfg.ConfigError, match=message):
        _catalog_with(tmp_path, text.format(checkpoint="m.pt", extra=""))


# ------------------------------------------------------------------------------- reports and RobustBench


# RobustBench's model-info JSON: the fields of ModelInfo (robustbench/utils.py) and of the structure documented in
# robustbench/leaderboard/template.py (generate_leaderboard's docstring), the accuracies as strings in percent as
# update_json writes them; checked against real files of RobustBench's repository, model_info/cifar10/Linf/
# Zhang2019Theoretically.json and Addepalli2022Efficient_RN18.json, and model_info/cifar10/L2/Rade2021Helper_R18_ddpm.json
# (their fields below, as they are there).
PERCENT = {"type": "string", "pattern": r"^\d+(\.\d+)?$"}
ROBUSTBENCH_MODEL_INFO = {
    "type": "object",
    "required": ["link", "name", "authors", "additional_data", "number_forward_passes", "dataset", "venue",
                 "architecture", "eps", "clean_acc", "reported", "autoattack_acc"],
    "properties": {
        "link": {"type": "string"}, "name": {"type": "string"}, "authors": {"type": "string"},
        "additional_data": {"type": "boolean"}, "number_forward_passes": {"type": "integer", "minimum": 1},
        "dataset": {"type": "string"}, "venue": {"type": "string"}, "architecture": {"type": "string"},
        "eps": {"type": ["string", "null"], "pattern": r"^\d+(\.\d+)?(/\d+)?$"},
        "clean_acc": PERCENT, "reported": PERCENT, "autoattack_acc": PERCENT, "corruptions_acc": PERCENT,
        "footnote": {"type": "string"}, "unreliable": {"type": "boolean"},
    },
}
ROBUSTBENCH_EXAMPLES = [
    {"link": "https://arxiv.org/abs/1901.08573",
     "name": "Theoretically Principled Trade-off between Robustness and Accuracy",
     "authors": "Hongyang Zhang, Yaodong Yu, Jiantao Jiao, Eric P. Xing, Laurent El Ghaoui, Michael I. Jordan",
     "additional_data": False, "number_forward_passes": 1, "dataset": "cifar10", "venue": "ICML 2019",
     "architecture": "WideResNet-34-10", "eps": "0.031", "clean_acc": "84.92", "reported": "56.43",
     "footnote": "Uses \\(\\ell_{\\infty} \\) = 0.031 \u2248 7.9/255 instead of 8/255.", "autoattack_acc": "53.08"},
    {"link": "https://arxiv.org/abs/2210.15318",
     "name": "Efficient and Effective Augmentation Strategy for Adversarial Training",
     "authors": "Sravanti Addepalli, Samyak Jain, Venkatesh Babu Radhakrishnan", "additional_data": False,
     "number_forward_passes": 1, "dataset": "cifar10", "venue": "NeurIPS 2022", "architecture": "ResNet-18",
     "eps": "8/255", "clean_acc": "85.71", "reported": "52.50", "autoattack_acc": "52.48", "unreliable": False},
    {"link": "https://openreview.net/forum?id=BuD2LmNaU3a", "name": "Helper-based Adversarial Training: Reducing "
     "Excessive Margin to Achieve a Better Accuracy vs. Robustness Trade-off",
     "authors": "Rahul Rade and Seyed-Mohsen Moosavi-Dezfooli", "additional_data": False, "number_forward_passes": 1,
     "dataset": "cifar10", "venue": "OpenReview, Jun 2021", "architecture": "PreActResNet-18", "eps": "0.5",
     "clean_acc": "90.57", "reported": "76.15", "footnote": "It uses additional 1M synthetic images in training.",
     "autoattack_acc": "76.15"},
]


def _robustbench_valid(info: dict) -> None:
    import jsonschema

    jsonschema.validate(info, ROBUSTBENCH_MODEL_INFO)
    # RobustBench's list_available_models reads the accuracies as float(field) / 100
    assert 0 <= float(info["clean_acc"]) <= 100 and 0 <= float(info["autoattack_acc"]) <= 100


def test_the_schema_holds_robustbenchs_own_files():
    for info in ROBUSTBENCH_EXAMPLES:
        _robustbench_valid(info)


def test_an_external_row_is_vouched_for_by_its_checkpoints_digest_and_exported_for_robustbench(
        tmp_path, monkeypatch, capsys):
    """An external model of the catalog evaluated by its evaluation job (`evaluate --run <id> --unit all`), its
    table built; the report refuses its metrics once the file is replaced, takes them again with the file's digest
    pinned (no file needed); RobustBench's JSON of it and of a catalog run, from metrics only, checked against
    RobustBench's fields; every refusal one line."""
    checkpoint = tmp_path / "mine.pt"
    source = _model("small_cnn", 8)
    torch.save(source.state_dict(), checkpoint)
    work, configs = _workflow(tmp_path, EXTERNAL.format(checkpoint=checkpoint, extra=""))
    layout = results_of(work)
    assert _cli(work, configs, monkeypatch, "download", "digits") == 0
    assert _cli(work, configs, monkeypatch, "evaluate", "--run", "mine", "--unit", "all") == 0
    suite = json.loads(layout.metrics("mine", "all").read_text())["evaluations"]
    assert list(suite) == ["aa", "clean"] and suite["clean"]["external"]["sha256"] == sha256_file(checkpoint)
    sha = suite["aa"]["external"]["sha256"]
    catalog = tcfg.load_catalog([work / f for f in (*SMOKE, "config/ext.yaml")])
    n = 64
    for attack, robust in (("clean", "1" * 48 + "0" * 16), ("aa", "1" * 20 + "0" * 44)):
        write_measurement(catalog, NT, attack, robust, clean="1" * 48 + "0" * 16, test_size=360)
    capsys.readouterr()
    assert _cli(work, configs, monkeypatch, "report", "exttable") == 0
    table = layout.tables("exttable")["md"].read_text()
    assert "| my model | ours |" in table and "external model `mine`, not trained here: small_cnn" in table

    # RobustBench's JSON of the external model and of a catalog run
    assert _cli(work, configs, monkeypatch, "export", "robustbench", "--run", "mine", "--name", "Mine",
                "--venue", "Tests 2026") == 0
    info = json.loads(layout.robustbench("digits", "Linf", "mine").read_text())
    _robustbench_valid(info)
    assert info["clean_acc"] == str(round(suite["clean"]["accuracy"] * 100, 2))
    assert info["autoattack_acc"] == info["reported"] == str(round(suite["aa"]["accuracy"] * 100, 2))
    assert (info["name"], info["venue"], info["eps"], info["dataset"], info["architecture"]) == \
           ("Mine", "Tests 2026", "0.3", "digits", "small_cnn")
    provenance = info["provenance"]
    assert provenance["external"] and provenance["sha256"] == sha and provenance["scale"] == "smoke"
    assert (provenance["threat_model"], provenance["test_examples"], provenance["test_size"]) == ("Linf", n, 360)
    assert provenance["metrics"] == [str(layout.metrics("mine", "all").relative_to(work))]
    assert provenance["git_commit"] and provenance["autoattack"]["version"]
    assert "not one of RobustBench's" in info["footnote"] and "smoke scale" in info["footnote"]
    out = tmp_path / "nt.json"
    assert _cli(work, configs, monkeypatch, "export", "robustbench", "--run", NT, "--out", str(out)) == 0
    info = json.loads(out.read_text())
    _robustbench_valid(info)
    assert (info["clean_acc"], info["autoattack_acc"], info["architecture"]) == ("75.0", "31.25", "small_cnn")
    assert not info["provenance"]["external"] and info["provenance"]["training_job"] == NT

    # refusals: nothing measured, a threat model without measurements, corruptions, an unknown id
    assert _cli(work, configs, monkeypatch, "export", "robustbench", "--run", "cifar10-resnet18-trades-lambda6") == 1
    assert "no clean measurement of 'cifar10-resnet18-trades-lambda6' yet; run `tradeoff evaluate --run " \
           "cifar10-resnet18-trades-lambda6 --unit all`" in _stderr_line(capsys)
    assert _cli(work, configs, monkeypatch, "export", "robustbench", "--run", "mine", "--threat-model", "L2") == 1
    assert "no aa_l2 measurement of 'mine' yet" in _stderr_line(capsys)
    assert _cli(work, configs, monkeypatch, "export", "robustbench", "--run", "mine", "--threat-model",
                "corruptions") == 1
    assert "RobustBench's corruption leaderboards are on CIFAR-10-C" in _stderr_line(capsys)
    assert _cli(work, configs, monkeypatch, "export", "robustbench", "--run", "mien") == 2
    assert "did you mean 'mine'?" in _stderr_line(capsys)

    # no checkpoint is loaded and PyTorch is not imported (the catalog from the jobs' cache)
    code = ("import sys; from tradeoff.cli import main; "
            f"rc = main({configs + ['export', 'robustbench', '--run', 'mine']!r}); "
            "assert rc == 0 and 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)")
    run([sys.executable, "-c", code], work)

    # the file is replaced: its metrics measured another model
    torch.save(_model("small_cnn", 9).state_dict(), checkpoint)
    assert _cli(work, configs, monkeypatch, "report", "exttable") == 1
    line = _stderr_line(capsys)
    assert f"field 'external.sha256' is {sha} (the file it measured), but external.mine.checkpoint" in line
    assert _cli(work, configs, monkeypatch, "export", "robustbench", "--run", "mine") == 1
    assert "cannot be vouched for" in _stderr_line(capsys)
    # no file and no pin: nothing vouches for it; the pin of the record's digest does, without the file
    checkpoint.unlink()
    assert _cli(work, configs, monkeypatch, "report", "exttable") == 1
    assert f"set external.mine.sha256: {sha}" in _stderr_line(capsys)
    (work / "config" / "ext.yaml").write_text((work / "config" / "ext.yaml").read_text().replace(
        "paper_dataset: cifar10", f"paper_dataset: cifar10, sha256: {sha}"))
    assert _cli(work, configs, monkeypatch, "report", "exttable") == 0
    # a record that is not an external model's, in an external model's cell
    path = layout.metrics("mine", "all")
    tampered = json.loads(path.read_text())
    del tampered["evaluations"]["clean"]["external"]
    path.write_text(json.dumps(tampered))
    assert _cli(work, configs, monkeypatch, "report", "exttable") == 1
    assert "is not the record of an external model's evaluation" in _stderr_line(capsys)


# ------------------------------------------------------------------------------------------ Snakemake


@pytest.mark.slow
def test_snakemake_builds_a_table_with_an_external_row_at_the_smoke_scale(tmp_path):
    """The real `snakemake`: the external model's evaluation job beside the run's training and evaluation, the table
    with both rows; nothing to do a second time; a new checkpoint file re-runs its evaluation alone."""
    checkpoint = tmp_path / "mine.pt"
    torch.save(_model("small_cnn", 10).state_dict(), checkpoint)
    work = workflow_copy(tmp_path / "w")
    (work / "config" / "ext.yaml").write_text(EXTERNAL.format(checkpoint=checkpoint, extra=""))
    files = ["--configfile", "config/smoke.yaml", "config/ext.yaml"]
    out = run(["snakemake", "--cores", "2", "exttable", *files], work, timeout=1200)
    assert "rule evaluate:" in out.stdout + out.stderr
    layout = results_of(work)
    table = layout.tables("exttable")["md"].read_text()
    assert "| nt | ours |" in table and "| my model | ours |" in table
    record = json.loads(layout.metrics("mine", "all").read_text())["evaluations"]["aa"]
    assert record["external"]["sha256"] == sha256_file(checkpoint) and record["run"] == "mine"
    assert "Nothing to be done" in run(["snakemake", "-n", "--cores", "1", "exttable", *files], work).stdout
    torch.save(_model("small_cnn", 11).state_dict(), checkpoint)
    dry = run(["snakemake", "-n", "--cores", "1", "exttable", *files], work).stdout
    jobs = re.findall(r"^(evaluate|train|table)\s+(\d+)$", dry, flags=re.M)
    assert dict(jobs) == {"evaluate": "1", "table": "1"}, dry
    assert "results/smoke/metrics/mine/all.json" in dry
