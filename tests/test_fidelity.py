"""Fidelity to the papers and the authors' code (issue 14): where paper and code agree the pipeline follows them, where
the paper is silent it follows the code, where they disagree the paper is the default and the code a named option.
Each test here fails on the behaviour it replaced; docs/differences.md names them."""

from __future__ import annotations

import copy

import pytest
import torch
from helpers import build_attack
from methods_support import SMOKE, TinyBN, build, digits, with_method
from torch import nn

from tradeoff import config as cfg
from tradeoff.attacks import from_spec
from tradeoff.attacks.base import random_start
from tradeoff.core.runtime import Runtime
from tradeoff.core.spec import Schedule
from tradeoff.evaluation.load import RunModel, load_model
from tradeoff.methods import rst as rst_module
from tradeoff.methods.generalist import communication_epoch, communication_step
from tradeoff.models import create_model
from tradeoff.storage.curves import read_curves
from tradeoff.training.train import train

PAPER = [cfg.ROOT / "config" / "config.yaml"]
DEMO = PAPER + [cfg.ROOT / "config" / "demo.yaml"]
NT, CAAT_RUN, GEN_RUN = "cifar10-resnet18-nt", "cifar10-resnet18-caat-ce-gamma0_8", "cifar10-resnet18-generalist"


@pytest.fixture(scope="module")
def paper():
    return cfg.load_catalog(PAPER, write_cache=False)


@pytest.fixture(scope="module")
def demo():
    return cfg.load_catalog(DEMO, write_cache=False)


def _attack(catalog, name, run, model, seed=0):
    spec = catalog.attack_for(name, run)
    return from_spec(spec, model, seed=seed)


def _cifar_batch(n=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = 0.2 + 0.6 * torch.rand(n, 3, 32, 32, generator=gen)  # away from the box: the projection alone binds
    return x, torch.randint(0, 10, (n,), generator=gen)


def _resnet(seed=0, bn="blocks"):
    torch.manual_seed(seed)
    return create_model("resnet18", 10, bn_running_stats=bn).eval()


# ------------------------------------------------------------------ 1. Generalist's communication epochs


@pytest.mark.parametrize("c, expected", [
    (2, list(range(76, 121, 2))),
    (5, list(range(75, 121, 5))),
    (9, [81, 90, 99, 108, 117]),
    (14, [84, 98, 112]),
])
def test_communication_when_t_mod_c_is_zero_from_t_prime(c, expected):
    """Algorithm 1 / Eq. 7 and the authors' code: B(t, t', c) = 1 iff t >= t' and t mod c == 0 (1-based epoch t)."""
    assert [t for t in range(1, 121) if communication_epoch(t, 75, c)] == expected


def test_communication_epochs_still_rescale(demo):
    """At the demo's 10 epochs t' and c are rescaled and kept as fractions of an epoch (c in iterations): the run
    communicates about as often as the paper's (c = 5: 8 times against 10; c = 15: 3 against 4), and the two are two
    training jobs (rounded
    to whole epochs, both were every epoch from 7 on, one job: Figure 3(b) drew one point)."""
    counts = {}
    for rid in ("cifar10-resnet18-generalist", "cifar10-resnet18-generalist-c15"):
        spec = demo.runs[rid]
        steps = -(-spec.trained_images(1437) // 64)  # the 1,137 digits left by the validation split, batches of 64
        assert steps == 18
        method = spec.method
        assert method.get("t_prime") == pytest.approx(75 / 12, abs=1e-3)
        counts[rid] = sum(communication_step(t, method.get("t_prime"), method.get("c"), steps)
                          for t in range(1, 10 * steps + 1))
    assert counts == {"cifar10-resnet18-generalist": 8, "cifar10-resnet18-generalist-c15": 3}
    assert demo.train_id["cifar10-resnet18-generalist-c15"] != demo.train_id["cifar10-resnet18-generalist"]


# ------------------------------------------------------------------ 2. CA-AT's evaluation (attack_test.py)


CAAT_CODE = {  # protocol attack -> (the CA-AT table attack it mirrors, torchattacks' settings of attack_test.py)
    "caatcode_pgd": ("caat_pgd", "pgd", "linf", {"steps": 10, "step_size": 2 / 225, "random_start": True,
                                                 "start": "uniform", "restarts": 1, "momentum": 0.0}),
    "caatcode_pgd_l2": ("caat_pgd_l2", "pgd", "l2", {"steps": 10, "step_size": 2 / 225, "random_start": True,
                                                     "start": "uniform_radius", "restarts": 1}),
    "caatcode_mim": ("caat_mim", "mim", "linf", {"steps": 10, "step_size": 2 / 255, "momentum": 1.0,
                                                 "random_start": False}),
    "caatcode_apgd": ("caat_apgd", "apgd-ce", "linf", {"steps": 10, "restarts": 1, "rho": 0.75}),
    "caatcode_apgd_l2": ("caat_apgd_l2", "apgd-ce", "l2", {"steps": 10, "restarts": 1, "rho": 0.75}),
    "caatcode_t_apgd_dlr": ("caat_t_apgd_dlr", "apgd-t", "linf", {"steps": 10, "restarts": 1, "target_classes": 9}),
    "caatcode_t_apgd_l2": ("caat_t_apgd_l2", "apgd-t", "l2", {"steps": 10, "restarts": 1, "target_classes": 9}),
    "caatcode_fab": ("caat_fab", "fab", "linf", {"steps": 10, "restarts": 1}),
    "caatcode_t_fab": ("caat_t_fab", "fab-t", "linf", {"steps": 10, "restarts": 1, "target_classes": 9}),
    "caatcode_fgsm": ("caat_fgsm", "fgsm", "linf", {"random_start": False}),
}


@pytest.mark.parametrize("name", sorted(CAAT_CODE))
def test_caat_code_attacks_have_the_codes_settings_over_the_tables_budgets(paper, name):
    """attack_test.py: PGD(eps, alpha=2/225, steps=10), PGDL2(eps, alpha=2/225, steps=10), MIFGSM(eps, steps=10,
    alpha=2/255, decay=1.0), APGD(norm, eps), APGDT, FAB(eps, steps=10, multi_targeted=False or True), FGSM(eps), at the
    budgets of the strong CA-AT attack that each mirrors."""
    strong, kind, norm, expected = CAAT_CODE[name]
    assert paper.attack_jobs(name) == [job.replace(strong, name, 1) for job in paper.attack_jobs(strong)]
    for job, strong_job in zip(paper.attack_jobs(name), paper.attack_jobs(strong)):
        spec, strong_spec = paper.attack_for(job, CAAT_RUN), paper.attack_for(strong_job, CAAT_RUN)
        assert (spec.type, spec.norm) == (kind, norm) and spec.eps == pytest.approx(strong_spec.eps), job
        attack = from_spec(spec, nn.Linear(2, 2), seed=0)
        got = {key: getattr(attack, key) for key in expected}
        assert got == {k: pytest.approx(v) if isinstance(v, float) else v for k, v in expected.items()}, job
        if kind == "fgsm":
            assert attack.step() == pytest.approx(spec.eps)  # one step of eps


def test_caat_code_pgd_l2_moves_at_most_ten_steps_of_2_225_whatever_eps(paper):
    """torchattacks' PGDL2 with alpha 2/225 and 10 steps: after its start, the 10 normalised steps move the image at
    most 10 * 2/225 = 0.089 in L2, whatever the budget (0.5 or 2): CA-AT's PGD-L2 accuracies barely fall with eps."""
    model, (x, y) = _resnet(), _cifar_batch()
    path = 10 * 2 / 225
    for label in ("0.5", "2"):
        attack = _attack(paper, f"caatcode_pgd_l2@{label}", CAAT_RUN, model, seed=3)
        x0 = x + attack.start_point(x, attack.generator(x.device))  # the same seeded start the attack draws
        x_adv = attack.perturb(x, y)
        assert ((x_adv - x0).flatten(1).norm(dim=1) <= path + 1e-5).all(), label
        assert ((x_adv - x0).flatten(1).norm(dim=1) > 0.9 * path).all(), label  # and it does walk that far
        attack.random_start = False  # from x itself: ||x_adv - x|| <= 0.089 however large eps is
        x_adv = attack.perturb(x, y)
        assert ((x_adv - x).flatten(1).norm(dim=1) <= path + 1e-5).all(), label
    # the start: a Gaussian direction at a radius uniform in [0, eps] (mean eps/2), not uniform in the ball (~eps)
    gen = torch.Generator().manual_seed(0)
    radius = random_start(torch.zeros(2000, 3, 32, 32), 2.0, "l2", gen, "uniform_radius").flatten(1).norm(dim=1)
    assert radius.max() <= 2.0 + 1e-5 and radius.mean() == pytest.approx(1.0, abs=0.05)
    assert random_start(torch.zeros(200, 3, 32, 32), 2.0, "l2", gen).flatten(1).norm(dim=1).min() > 1.9


def test_caat_code_mifgsm_path_is_ten_steps_of_2_255(paper):
    """MIFGSM(eps, steps=10, alpha=2/255, decay=1.0) from x: its path never leaves the 20/255 box, so at 24/255 and
    32/255 it finds the same images (the paper's MIFGSM accuracies are equal there)."""
    model, (x, y) = _resnet(), _cifar_batch()
    out = {label: _attack(paper, f"caatcode_mim@{label}", CAAT_RUN, model).perturb(x, y)
           for label in ("24_255", "32_255")}
    assert torch.equal(out["24_255"], out["32_255"])
    assert (out["24_255"] - x).abs().max() <= 20 / 255 + 1e-6
    assert (out["24_255"] - x).abs().max() > 19 / 255


# ------------------------------------------------------------------ 3. the Generalist code's evaluation (main.py)


def test_generalist_code_attacks_have_the_codes_settings(paper, demo):
    for name in ("gencode_pgd20", "gencode_pgd100", "gencode_mim", "gencode_cw"):
        spec = paper.attack_for(name, GEN_RUN)
        # PGD20 and PGD100 alike: 10 steps of 0.007 at 8/255 (the code's attack ignores the step count it is given)
        assert (spec.params["steps"], spec.eps, spec.step_size) == (10, pytest.approx(8 / 255), pytest.approx(0.007))
        assert spec.params["random_start"] is True, name
        at_demo = demo.attack_for(name, GEN_RUN)  # the path keeps its ratio to the budget: 0.3 on digits
        assert at_demo.eps == pytest.approx(0.3) and at_demo.step_size == pytest.approx(0.007 * 0.3 * 255 / 8)
    mim, cw = paper.attack_for("gencode_mim", GEN_RUN), paper.attack_for("gencode_cw", GEN_RUN)
    assert mim.type == "mim" and mim.params["momentum"] == 1.0 and mim.params.get("start", "uniform") == "uniform"
    assert cw.type == "cw" and cw.params["kappa"] == 50 and cw.params["clip_start"] is False
    # the strong CW of Table 1 clips its start (docs/differences.md): the same attack otherwise
    strong = paper.attack_for("cw", GEN_RUN)
    assert strong.params.get("clip_start", True) is True and strong.step_size == pytest.approx(cw.step_size)


def test_cw_start_unclipped_only_when_asked():
    """The Generalist code's CW starts at x + U(-eps, eps) without clipping to [0, 1] (``clip_start: false``); the
    project's CW clips it. Either way the returned images are in [0, 1] and in the eps-ball."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 10))
    x, y = torch.zeros(64, 1, 4, 4), torch.randint(0, 10, (64,))  # black images: half the start leaves [0, 1]
    for clip in (True, False):
        attack = build_attack("cw", model, eps=0.1, steps=3, step_size=0.03, clip_start=clip, seed=0)
        start = x + attack.start_point(x, attack.generator(x.device))
        assert (start.min() < 0) == (not clip)
        x_adv = attack.perturb(x, y)
        assert x_adv.min() >= 0 and (x_adv - x).abs().max() <= 0.1 + 1e-7


def test_protocols_map_table_attacks_to_existing_attacks(paper):
    protocols = paper.config["protocols"]
    assert set(protocols) == {"generalist-code", "caat-code"}
    columns = {split for t in paper.targets.values() for a in t.columns.values()
               for split in [cfg.split_budget(a)[0]]}
    for name, protocol in protocols.items():
        assert protocol["title"] and protocol["attacks"], name
        for strong, replacement in protocol["attacks"].items():
            assert strong in paper.attacks and strong in columns, (name, strong)  # a strong attack of the tables
            assert replacement in paper.attacks, (name, replacement)
            strong_labels = cfg.sweep_labels(paper.attacks[strong], strong)
            assert cfg.sweep_labels(paper.attacks[replacement], replacement) == strong_labels, (name, strong)
    assert protocols["caat-code"]["attacks"] == {strong: name for name, (strong, *_) in CAAT_CODE.items()}
    assert protocols["generalist-code"]["attacks"] == {"pgd20": "gencode_pgd20", "pgd100": "gencode_pgd100",
                                                       "mim": "gencode_mim", "cw": "gencode_cw"}
    bad = copy.deepcopy(paper.config)
    del bad["protocols"]["caat-code"]["title"]
    with pytest.raises(cfg.ConfigError, match="protocols"):
        cfg.validate_schema(bad)


# ------------------------------------------------------------------ 4. MIM's start


def test_generalist_mim_starts_in_the_ball_and_caat_mifgsm_from_x(paper):
    """The Generalist code's MIM (the tables' `mim`, paper silent) starts uniformly in the eps-ball, so its result
    depends on the seed; CA-AT's MIFGSM (torchattacks) starts at x, so it does not."""
    model, (x, y) = _resnet(), _cifar_batch()
    for name, seeded in (("mim", True), ("caat_mim@8_255", False), ("gencode_mim", True)):
        a, b = (_attack(paper, name, GEN_RUN, model, seed=s).perturb(x, y) for s in (0, 1))
        assert (not torch.equal(a, b)) == seeded, name
    assert paper.attack_for("mim_l2", "cifar10-resnet18-generalist-l2").params["random_start"] is True


# ------------------------------------------------------------------ 5. the AT learner's attack in eval mode


def test_generalist_at_learner_attacks_in_eval_mode(paper):
    """The authors' PGD calls model.eval() before attacking: BatchNorm statistics see only the training forward."""
    x, y = digits(32)
    for mode, forwards in (("eval", 1), ("train", 1 + 3)):  # the attack's 3 steps in train mode update them too
        params = {} if mode == "eval" else {"attack_mode": mode}  # eval is the default
        method = build("generalist", model=TinyBN, steps=3, **params)
        method.set_epoch(1)
        method.train_step(x, y)
        assert int(method.at.model.bn.num_batches_tracked) == forwards, mode
    generalists = [spec for spec in paper.runs.values() if spec.method.name == "generalist"]
    assert generalists and all(spec.method.get("attack_mode") == "eval" for spec in generalists)


def test_caat_training_attack_in_eval_mode(paper):
    """The CA-AT code makes its training examples under ctx_noparamgrad_and_eval (the paper does not say): vanilla
    AT and CA-AT attack in eval mode, so BatchNorms with running statistics see only the two training passes."""
    x, y = digits(32)
    for name, params in (("vanilla", {"lam": 0.5}), ("caat", {"gamma": 0.8})):
        for mode, forwards in (("eval", 2), ("train", 2 + 3)):
            extra = {} if mode == "eval" else {"attack_mode": mode}
            method = build(name, model=TinyBN, steps=3, **params, **extra)
            method.set_epoch(1)
            method.train_step(x, y)
            assert int(method.model.bn.num_batches_tracked) == forwards, (name, mode)
    caat = [s for s in paper.runs.values()
            if s.method.name in ("caat", "vanilla") and s.method.get("lam") != 0]
    assert caat and all(s.method.get("attack_mode") == "eval" for s in caat)


def test_pgd_at_and_iat_attack_in_train_mode():
    """PGD-AT (as Madry's and Rice's code) and IAT make their examples in train mode: BatchNorm sees the attack's
    3 steps; `attack_mode: eval` hides them. AT(beta = 1/2) takes two training passes (clean and adversarial, each
    normalised with its own batch statistics), AT(beta = 1) one; IAT two (the mixed clean and adversarial batches)."""
    x, y = digits(32)
    for name, params, passes in (("pgd_at", {"beta": 1.0}, 1), ("pgd_at", {"beta": 0.5}, 2), ("iat", {}, 2)):
        for mode, attack_passes in (("train", 3), ("eval", 0)):
            extra = {} if mode == "train" else {"attack_mode": mode}
            method = build(name, model=TinyBN, steps=3, **params, **extra)
            method.set_epoch(1)
            method.train_step(x, y)
            assert int(method.model.bn.num_batches_tracked) == passes + attack_passes, (name, params, mode)


def test_caat_adversarial_losses_are_the_regularisers_alone():
    """With adv_loss trades or clp, vanilla AT's and CA-AT's L_adv is the regulariser alone (KL / batch, or the mean
    softmax L2 distance), as the CA-AT code; the CE of the clean batch is L_clean."""
    from tradeoff.methods.clp import softmax_distance
    from tradeoff.methods.trades import kl_divergence

    x, y = digits(32)
    for loss, term in (("trades", lambda a, c: kl_divergence(a, c) / len(a)), ("clp", softmax_distance)):
        method = build("vanilla", lam=0.5, adv_loss=loss, steps=2)
        before = copy.deepcopy(method.model.state_dict())  # train-mode passes move BatchNorm's running statistics
        torch.manual_seed(5)
        l_clean, l_adv, _ = method.losses(x, y)
        method.model.load_state_dict(before)
        torch.manual_seed(5)
        x_adv = method.adversarial(x, y)
        with torch.no_grad():
            method.model.train()
            expected = term(method.model(x_adv), method.model(x))
            clean = torch.nn.functional.cross_entropy(method.model(x), y)
        assert l_adv.item() == pytest.approx(expected.item(), rel=1e-5), loss
        assert l_clean.item() == pytest.approx(clean.item(), rel=1e-5), loss


# ------------------------------------------------------------------ 6. CA-AT's stem BatchNorm


def test_caat_resnet_keeps_running_statistics_in_the_stem_only(paper):
    """`bn_running_stats: blocks` (CA-AT's presets): the residual blocks' BatchNorms normalise with the batch's
    statistics, the stem's keeps running statistics, as the authors' ResNet. In train mode the model computes what
    the all-off variant computes; in eval mode the stem's running statistics make it differ."""
    specs = [s for s in paper.runs.values()
             if s.method.name in ("caat", "vanilla") and "adapter" not in s.arch]
    assert specs and all(s.bn_running_stats == "blocks" for s in specs)
    blocks, off = _resnet(bn="blocks"), _resnet(bn=False)
    assert blocks.bn1.track_running_stats and not off.bn1.track_running_stats
    inner = [m for name, m in blocks.named_modules() if isinstance(m, nn.BatchNorm2d) and name != "bn1"]
    assert len(inner) == 19 and not any(m.track_running_stats for m in inner)  # 16 in blocks, 3 in shortcuts
    off.load_state_dict({k: v for k, v in blocks.state_dict().items() if k in off.state_dict()})
    x, _ = _cifar_batch(8)
    blocks.train()
    with torch.no_grad():
        for _ in range(3):
            blocks(x + 0.1 * torch.randn_like(x))  # the stem's running statistics move away from their start
    off.train()
    blocks.train()
    with torch.no_grad():
        assert torch.allclose(blocks(x), off(x), atol=1e-5)
        blocks.eval(), off.eval()
        assert not torch.allclose(blocks(x), off(x), atol=1e-3)
    wrn = create_model("wrn-28-10", 10, bn_running_stats="blocks")
    kept = [name for name, m in wrn.named_modules() if isinstance(m, nn.BatchNorm2d) and m.track_running_stats]
    assert kept == ["bn1"]


# ------------------------------------------------------------------ 7. checkpoint selection


def _smoke_spec(run=NT, **selection):
    catalog = cfg.load_catalog(SMOKE, write_cache=False)
    spec = catalog.runs[run]
    return spec.replace(selection=spec.selection.replace(**selection)), catalog.data_root


def _train(spec, data_root, results, run_id="sel"):
    paths = train(run_id, spec, results=results, data_root=data_root, runtime=Runtime(torch.device("cpu")),
                  progress=False)
    return read_curves(paths.curves), load_model(RunModel(paths.model))[1]["selected_epoch"]


def test_generalist_code_min_clean_floor(tmp_path):
    """The paper keeps the best clean + PGD20 epoch; the authors' code only among epochs with clean >= 88%
    (`selection.min_clean: 0.88`), and fails when none reaches it."""
    spec, root = _smoke_spec(mode="best", min_clean=0.0)
    spec = spec.replace(epochs=3)
    rows, selected = _train(spec, root, tmp_path / "a")
    clean = [float(r["eval_clean"]) for r in rows]
    score = [c + float(r["eval_robust"]) for c, r in zip(clean, rows)]
    assert selected == 1 + score.index(max(score))
    floor = max(clean)  # only the epochs at the best clean accuracy qualify
    spec = spec.replace(selection=spec.selection.replace(min_clean=floor))
    _, selected = _train(spec, root, tmp_path / "b")
    eligible = [s if c >= floor else -1 for c, s in zip(clean, score)]
    assert selected == 1 + eligible.index(max(eligible))
    if floor < 1:
        spec = spec.replace(selection=spec.selection.replace(min_clean=min(1.0, floor + 1e-6)))
        with pytest.raises(RuntimeError, match="min_clean"):
            _train(spec, root, tmp_path / "c")


def test_best_robust_selection_measures_every_n_epochs(tmp_path, paper, demo):
    """CA-AT's code: the best PGD-20 accuracy, measured every 25 epochs (and at the last); `every` is epoch-valued."""
    assert paper.runs[CAAT_RUN].selection.mode == "best_robust"
    assert paper.runs[CAAT_RUN].selection.every == 25
    assert paper.runs[CAAT_RUN].selection.attack.params["steps"] == 20
    assert demo.runs[CAAT_RUN].selection.every == pytest.approx(1.25)  # 25 of 200 epochs -> 1.25 of 10
    spec, root = _smoke_spec(mode="best_robust", every=2)
    spec = spec.replace(epochs=5)
    rows, selected = _train(spec, root, tmp_path)
    robust = [r["eval_robust"] for r in rows]  # not measured: no point in the curve (tradeoff.storage.curves)
    assert [r is None for r in robust] == [True, False, True, False, False]  # epochs 2, 4 and the last
    measured = {epoch: robust[epoch - 1] for epoch in (2, 4, 5)}
    best = max(measured.values())
    assert selected == max(e for e, r in measured.items() if r == best)  # a tie keeps the later epoch (>=)


# ------------------------------------------------------------------ 8. RST


def test_rst_is_raghunathan_et_al_with_its_start_in_eval_mode(paper):
    """The Generalist paper's RST is its ref. [26], Raghunathan et al. 2020 (p-lambda/robust_tradeoff): its training
    attack runs in eval mode from x + 0.001 N(0, 1), not from a uniform point of the eps-ball."""
    assert "Raghunathan" in rst_module.__doc__ and "ICML 2020" in rst_module.__doc__
    rsts = {rid: s for rid, s in paper.runs.items() if s.method.name == "rst"}
    assert len(rsts) == 3
    for rid, spec in rsts.items():
        attack = spec.method.get("attack")
        assert spec.method.get("attack_mode") == "eval" and spec.method.get("beta") == 0.5, rid
        assert (attack["start"], attack["clip_start"], attack["steps"]) == ("normal", False, 10), rid
        assert (attack["eps"], attack["step_size"]) == (pytest.approx(8 / 255), pytest.approx(2 / 255)), rid
    x, y = digits(64)
    method = build("rst", model=TinyBN, steps=3, attack={"type": "pgd", "start": "normal", "clip_start": False})
    delta = method.attack.start_point(x, torch.Generator().manual_seed(0))
    assert delta.std().item() == pytest.approx(0.001, rel=0.1) and (x + delta).min() < 0  # not clipped
    method.set_epoch(1)
    method.train_step(x, y)
    assert int(method.model.bn.num_batches_tracked) == 2  # the clean and adversarial passes; none from the attack


# ------------------------------------------------------------------ 9. schedules at the 1-based epoch


@pytest.mark.parametrize("lr_update", ["epoch", "step"])
def test_last_epoch_trains_at_the_last_breakpoint(tmp_path, lr_update):
    """The authors' code interpolates lr and gamma at the 1-based epoch: the last epoch trains at the last
    breakpoint's values (gamma 0 at epoch 120, not 0.025), the first at the value at epoch 1. Per step, each step
    reads the schedule at its own end, so an epoch's last step reads what the per-epoch update reads."""
    spec, root = _smoke_spec(GEN_RUN, mode="last")
    spec = with_method(spec, track_learners=None, snapshot_epochs=None,
                       gamma={"epochs": [0, 2, 4], "values": [1.0, 1.0, 0.0]})
    spec = spec.replace(epochs=4, lr_update=lr_update, lr=Schedule(epochs=(0, 4), values=(0.1, 0.02)))
    rows, _ = _train(spec, root, tmp_path)
    assert [float(r["lr"]) for r in rows] == pytest.approx([0.08, 0.06, 0.04, 0.02])
    gamma = [float(r["train_gamma"]) for r in rows]
    if lr_update == "epoch":
        assert gamma == pytest.approx([1.0, 1.0, 0.5, 0.0])
    else:
        assert gamma[-1] < 0.5 and gamma[0] == 1.0


def test_states_of_the_older_trainer_are_discarded_not_resumed(tmp_path, caplog):
    """Reading schedules at the 1-based epoch changes what a run computes for unchanged settings: an epoch state
    written by the older trainer (its identity the settings' digest alone) is discarded, not resumed."""
    from tradeoff.storage import checkpoint
    from tradeoff.storage.layout import Layout

    spec, root = _smoke_spec(mode="last")
    spec = spec.replace(epochs=2)
    _train(spec, root, tmp_path)
    state_dir = Layout(tmp_path).states("sel")
    epoch, state = checkpoint.latest_state(state_dir)
    assert epoch == 2
    with caplog.at_level("INFO", logger="tradeoff.training.train"):
        _train(spec, root, tmp_path)  # a state this trainer wrote is resumed (nothing left to train)
    assert "resuming after epoch 2" in caplog.text and "discarding" not in caplog.text
    caplog.clear()
    checkpoint.save_state(state_dir, epoch, {**state, "spec": cfg.spec_digest(spec)})  # as the older trainer wrote
    with caplog.at_level("INFO", logger="tradeoff.training.train"):
        rows, _ = _train(spec, root, tmp_path)
    assert "discarding them" in caplog.text and "resuming" not in caplog.text and len(rows) == 2


# ------------------------------------------------------------------ 10. gradient normalisation's floor


def test_zero_gradient_steps_stay_finite():
    """MIM divides each gradient by its mean absolute value and PGD-L2 by its norm, with the divisor floored at
    1e-12: a zero gradient (a constant model) makes a zero step, not NaN (torchattacks' MIFGSM divides by zero)."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 10))
    with torch.no_grad():
        model[1].weight.zero_()
    x, y = torch.rand(8, 1, 4, 4), torch.randint(0, 10, (8,))
    assert torch.equal(build_attack("mim", model, eps=0.1).perturb(x, y), x)
    out = build_attack("pgd", model, eps=0.5, norm="l2", steps=3, step_size=0.1, random_start=False).perturb(x, y)
    assert torch.equal(out, x)


def test_a_protocol_attack_equal_up_to_rounding_is_the_columns_own_job(paper):
    """The code's MIM (10 steps of eps*0.223125) is the strong MIM (10 steps of 0.007) at 8/255, up to float
    rounding: the table shows `=` and no second evaluation job runs; PGD20 and CW differ and run twice."""
    assert paper.attack_for("gencode_mim", GEN_RUN).step_size != paper.attack_for("mim", GEN_RUN).step_size
    assert [paper.protocol_attack("table1a", a, GEN_RUN) for a in ("pgd20", "mim", "cw", "aa")] == [
        "gencode_pgd20", None, "gencode_cw", None]
