"""The audit against known answers: models whose evaluation is known to be wrong in one way each must fail the check
that finds that way, and a plainly trained model must pass every check. Tiny models on generated data: seconds."""

from __future__ import annotations

import json
import re

import pytest
import torch
from torch import nn

from tradeoff.audit.checks import Auditor, Settings, compare, must_fail_budget

CLASSES, PIXELS = 4, 64
EPS = 0.25  # where the plain model is robust on about 40% of the test set: attacks can be told apart


def _data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Four classes of 1x8x8 images: each a fixed pattern of 0.2 and 0.8 pixels, plus noise."""
    templates = torch.rand(CLASSES, PIXELS, generator=torch.Generator().manual_seed(0)).gt(0.5).float() * 0.6 + 0.2
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = (templates[y] + 0.05 * torch.randn(n, PIXELS, generator=gen)).clamp(0, 1)
    return x.view(n, 1, 8, 8), y


class Net(nn.Module):
    """An MLP behind an input layer ``front`` (the identity for a plain model)."""

    def __init__(self, front=None, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.front = front or (lambda x: x)
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(PIXELS, 32), nn.ReLU(), nn.Linear(32, CLASSES))
        self.scale = 1.0

    def forward(self, x):
        return self.body(self.front(x)) * self.scale


def _train(net: Net) -> Net:
    x, y = _data(512, seed=1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for step in range(150):
        idx = torch.arange(step * 64, step * 64 + 64) % len(x)
        opt.zero_grad()
        nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
        opt.step()
    return net.eval()


@pytest.fixture(scope="module")
def test_set():
    return _data(300, seed=2)


@pytest.fixture(scope="module")
def plain():
    return _train(Net())


@pytest.fixture(scope="module")
def surrogate():
    return _train(Net(seed=1))


PGD = {"type": "pgd", "norm": "linf", "eps": EPS, "steps": 10, "step_size": EPS / 4, "random_start": True,
       "restarts": 1}
SQUARE = {"type": "square", "norm": "linf", "eps": EPS, "queries": 300}
FAST = Settings(step_multipliers=(1, 10), restarts=3, eps_multipliers=(0.5, 1.0), eot_draws=8, surface_examples=8,
                surface_points=5)


def _audit(model, test_set, *, attack=PGD, surrogate=None, protocol=None) -> dict[str, dict]:
    x, y = test_set
    auditor = Auditor(model, x, y, attack=attack, black_box=SQUARE, settings=FAST, surrogate=surrogate,
                      protocol=protocol)
    return {c["name"]: c for c in auditor.run()}


def test_a_plainly_trained_model_passes_every_check(plain, surrogate, test_set):
    checks = _audit(plain, test_set, surrogate=surrogate,
                    protocol=[("pgd20", {**PGD, "steps": 20}, "pgd10", PGD)])
    assert {name: c["verdict"] for name, c in checks.items()} == {name: "pass" for name in checks}
    assert checks["eps"]["numbers"]["curve"][-1] == (must_fail_budget("linf", test_set[0]), 0.0)


@pytest.fixture(scope="module")
def quantised(surrogate, test_set):
    """The checks of a model behind input quantisation (rounding has a zero gradient: shattered gradients, PGD
    never moves it)."""
    return _audit(_train(Net(front=lambda x: torch.round(x * 2) / 2)), test_set, surrogate=surrogate)


def test_a_quantised_input_layer_fails_the_gradient_check(quantised):
    checks = quantised
    assert checks["gradients"]["verdict"] == "fail"
    assert checks["gradients"]["numbers"]["zero_fraction"] == 1.0
    assert checks["surface"]["verdict"] == "fail"


def test_a_steep_sigmoid_input_layer_fails_the_gradient_check(test_set):
    """A saturating input layer: sigmoid(1000 (x - 1/2)) has a gradient that underflows to zero away from 1/2."""
    checks = _audit(_train(Net(front=lambda x: torch.sigmoid(1000 * (x - 0.5)))), test_set)
    assert checks["gradients"]["verdict"] == "fail"
    assert checks["eps"]["verdict"] == "fail"  # a plateau: PGD cannot reach even the mid-grey image


def test_scaled_logits_fail_the_loss_check_where_cw_and_dlr_still_work(plain, test_set):
    """Logits x 1e4: the cross-entropy saturates and its gradient vanishes; the margin and DLR losses are unharmed."""
    scaled = _train(Net())
    scaled.scale = 1e4
    checks = _audit(scaled, test_set)
    losses = checks["losses"]
    assert losses["verdict"] == "fail"
    assert losses["numbers"]["accuracies"]["ce"] > losses["numbers"]["accuracies"]["cw"] + 0.2
    assert checks["gradients"]["verdict"] == "fail"


def test_a_randomized_model_fails_the_randomness_check(test_set):
    """Gaussian noise on the input of every forward pass: one draw's robust accuracy is not the model's."""
    noisy = _train(Net(front=lambda x: x + 0.8 * torch.randn_like(x)))
    checks = _audit(noisy, test_set)
    assert checks["randomness"]["verdict"] == "fail"
    assert checks["randomness"]["numbers"]["spread"] > FAST.tolerance
    assert checks["autoattack"]["verdict"] == "warn"  # AutoAttack's own check_randomized
    assert any("randomized" in w for w in checks["autoattack"]["numbers"]["warnings"])


def test_a_weak_attack_protocol_fails_the_steps_and_protocol_checks(plain, test_set):
    """PGD-1 of eps/10 (too few steps for its step): 10x the steps lowers robust accuracy, and beside the strong PGD
    the protocol overstates robustness."""
    weak = {**PGD, "steps": 1, "step_size": EPS / 10}
    checks = _audit(plain, test_set, attack=weak, protocol=[("pgd10", PGD, "pgd1-weak", weak)])
    assert checks["steps"]["verdict"] == "fail"
    assert checks["protocol"]["verdict"] == "fail"
    assert checks["protocol"]["numbers"]["pairs"][0]["protocol_accuracy"] > \
        checks["protocol"]["numbers"]["pairs"][0]["strong_accuracy"]


def test_a_black_box_attack_stronger_than_the_white_box_fails(quantised):
    """Square beating every gradient attack is masking: the quantised model's gradient is zero, its scores are
    there for Square to search."""
    checks = quantised
    assert checks["black-box"]["verdict"] == "fail"


def test_transfer_stronger_than_the_white_box_fails(quantised):
    """Adversarial examples of a plain surrogate break the quantised model, which its own gradients cannot move."""
    checks = quantised
    assert checks["transfer"]["verdict"] == "fail"
    assert checks["transfer"]["numbers"]["accuracy"] < checks["transfer"]["numbers"]["white_box"] - 0.2


def test_compare_needs_a_material_and_significant_gap():
    assert compare("1" * 100, "1" * 99 + "0", 0.02, 0.05)[0] == "pass"       # 1 point: below the tolerance
    assert compare("1" * 100, "1" * 90 + "0" * 10, 0.02, 0.05)[0] == "fail"  # 10 of 10 discordant: p = 0.001
    assert compare("1" * 10, "1" * 7 + "0" * 3, 0.02, 0.05)[0] == "warn"     # 30 points but 3 of 3: p = 0.125
    assert compare("0" * 10 + "1" * 90, "1" * 90 + "0" * 10, 0.02, 0.05)[0] == "pass"  # same accuracy, other examples


# ------------------------------------------------------------------------------------------ the command, the pipeline


SMOKE = ("config/config.yaml", "config/smoke.yaml")


def _workflow(tmp_path):
    from helpers import data_root, workflow_copy

    work = workflow_copy(tmp_path / "w")
    (work / "config" / "local.yaml").write_text(f"paths: {{data: {data_root()}}}\n")
    return work, [a for f in (*SMOKE, "config/local.yaml") for a in ("--config", f)]


def test_audit_of_a_checkpoint_writes_its_page_and_the_summary_lists_its_failures(tmp_path, monkeypatch, capsys):
    """`tradeoff audit --checkpoint`: a small CNN whose last layer is scaled by 1e4 (saturated CE) at the smoke scale,
    its record, page and figure in results/smoke/audit/, the verdicts first on the page; the summary's failed checks."""
    from helpers import results_of

    from tradeoff import cli, models

    work, configs = _workflow(tmp_path)
    monkeypatch.chdir(work)
    torch.manual_seed(0)
    model = models.build_architecture("small_cnn", 10, in_channels=1, image_size=8)
    state = model.state_dict()
    last = [k for k in state if k.endswith(".weight")][-1]
    state[last] *= 1e4
    state[last.replace(".weight", ".bias")] *= 1e4
    torch.save(state, tmp_path / "scaled.pt")
    args = ["audit", "--checkpoint", str(tmp_path / "scaled.pt"), "--arch", "small_cnn", "--dataset", "digits",
            "--name", "scaled"]
    assert cli.main(configs + args) == 0
    paths = results_of(work).audit("scaled")
    assert all(p.is_file() for p in paths.values())
    record = json.loads(paths["json"].read_text())
    verdicts = {c["name"]: c["verdict"] for c in record["checks"]}
    assert verdicts["gradients"] == "fail" and record["verdict"] == "fail"
    assert record["external"]["sha256"] and record["examples"] == 64  # the smoke scale's test examples
    page = paths["md"].read_text().splitlines()
    assert page[0] == "# Audit of scaled (smoke scale)" and "FAIL (" in page[2] and page[4].startswith("| check |")
    assert "scaled / gradients: fail" in capsys.readouterr().out

    assert cli.main(configs + ["summary"]) == 0
    summary = results_of(work).summary()["md"].read_text()
    assert "## Failed audit checks" in summary and "- scaled / gradients: " in summary

    # one clear line, before any work: a run whose model is not trained, options that need --checkpoint
    assert cli.main(configs + ["audit", "--run", "cifar10-resnet18-nt"]) == 1
    assert "no such model file" in capsys.readouterr().err
    assert cli.main(configs + ["audit", "--run", "cifar10-resnet18-nt", "--arch", "small_cnn"]) == 2
    assert cli.main(configs + ["audit"]) == 2


def test_audit_settings_are_checked_naming_the_key(tmp_path, monkeypatch, capsys):
    from tradeoff import cli

    work, configs = _workflow(tmp_path)
    monkeypatch.chdir(work)
    for text, message in (("audit: {attack: square}\n", "audit.attack: 'square' is an attack of type 'square'"),
                          ("audit: {black_box: nosuch}\n", "audit.black_box: unknown attack 'nosuch'"),
                          ("audit: {restarts: 1}\n", "audit.restarts")):
        (work / "config" / "bad.yaml").write_text(text)
        assert cli.main(configs + ["--config", "config/bad.yaml", "check-config"]) == 2
        assert message in capsys.readouterr().err


def test_the_audit_target_is_one_job_per_row_model_in_snakemake_dvc_and_plan(tmp_path):
    """`audit_table1a`: an audit job per model of its rows, reading the model and its surrogate, the same in
    Snakemake's DAG and DVC's stages, and priced by `plan`."""
    from helpers import run

    from tradeoff import config as tcfg
    from tradeoff import dvc
    from tradeoff.audit.jobs import audited_models, surrogate_for
    from tradeoff.costs import format_plan, plan

    work, _ = _workflow(tmp_path)
    files = [str(work / f) for f in (*SMOKE, "config/local.yaml")]
    catalog = tcfg.load_catalog(files)
    models = audited_models(catalog, "table1a")
    assert len(models) == 9 and models[1] == "cifar10-resnet18-at-beta1"
    assert surrogate_for(catalog, models[1]) == "cifar10-resnet18-trades-lambda6"  # never the model itself

    dry = run(["snakemake", "-n", "--cores", "1", "audit_table1a", "--configfile", *SMOKE, "config/local.yaml"],
              work).stdout
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", dry, re.M))
    assert counts["audit"] == "9" and counts["audit_table1a"] == "1" and "evaluate" not in counts

    stages = dvc.stages(catalog, list(SMOKE), ["audit_table1a"])
    audits = {name: s for name, s in stages.items() if name.startswith("audit@")}
    assert sorted(audits) == sorted(f"audit@{m}" for m in models)
    assert audits["audit@cifar10-resnet18-at-beta1"]["deps"][-3:-1] == [
        str(catalog.layout.model("cifar10-resnet18-at-beta1")), str(catalog.layout.model(
            "cifar10-resnet18-trades-lambda6"))]
    assert not any(name.startswith(("evaluate@", "table@", "summary")) for name in stages)

    priced = plan(catalog, "audit_table1a", 2)
    assert [j.kind for j in priced["jobs"]] == ["audit"] * 9 and all(j.hours > 0 for j in priced["jobs"])
    assert "9 audit" in format_plan(priced)
