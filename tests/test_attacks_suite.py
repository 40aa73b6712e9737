"""Every attack of the registry is held to its threat model; the L-inf attacks to the exact worst case of a
linear classifier; AutoAttack to the authors' own run of it, example by example."""

from __future__ import annotations

import warnings

import pytest
import torch
from helpers import build_attack
from torch import nn

from tradeoff import attacks
from tradeoff.attacks.autoattack import COMPONENTS, STANDARD
from tradeoff.core.spec import AttackSpec

# every registered attack with small settings (the AutoAttack family keeps its standard settings where cheap)
FAST = {
    "clean": {},
    "pgd": {"steps": 5},
    "fgsm": {},
    "mim": {"steps": 5},
    "cw": {"steps": 5},
    "pgd-dlr": {"steps": 5},
    "t-pgd": {"steps": 3, "target_classes": 3},
    "apgd-ce": {"steps": 10},
    "apgd-dlr": {"steps": 10},
    "apgd-t": {"steps": 10, "target_classes": 3},
    "fab": {"steps": 10},
    "fab-t": {"steps": 10, "target_classes": 3},
    "square": {"queries": 100},
    "autoattack": {},
    "rays": {"queries": 100},
}


def test_every_registered_attack_is_covered():
    assert set(FAST) == set(attacks.attack_names())


def _cnn(seed=0, k=10):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 64, k)).eval()


@pytest.fixture(scope="module")
def batch():
    model = _cnn()
    x = torch.rand(24, 1, 8, 8)
    x[:4] = x[:4].round()  # pixels at the box's faces
    with torch.no_grad():
        y = model(x).argmax(1)
    y[:3] = (y[:3] + 1) % 10  # a few misclassified examples
    return model, x, y


@pytest.mark.parametrize("norm, eps", [("linf", 0.05), ("l2", 0.5)])
@pytest.mark.parametrize("name", sorted(FAST))
def test_output_in_ball_and_box_and_no_stronger_than_clean(name, norm, eps, batch):
    model, x, y = batch
    cls = attacks.ATTACKS[name]
    if norm not in cls.norms:
        pytest.skip(f"{name} is not defined for {norm}")
    params = dict(FAST[name])
    if name == "autoattack":  # keep the ensemble cheap here; its standard run is checked below
        params["components"] = ["apgd-ce", "fab-t"]
    attack = build_attack(name, model, eps=eps, norm=norm, seed=1, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x_adv = attack.perturb(x, y)
        robust = attack.robust(x, y)
    assert x_adv.shape == x.shape
    delta = (x_adv - x).flatten(1)
    size = delta.abs().amax(1) if norm == "linf" else delta.norm(dim=1)
    assert (size <= eps * (1 + 1e-5) + 1e-6).all(), size.max()
    assert x_adv.min() >= 0 and x_adv.max() <= 1
    with torch.no_grad():
        clean = model(x).argmax(1) == y
    assert robust.dtype == torch.bool and robust.shape == y.shape
    assert robust.sum() <= clean.sum()
    assert not (robust & ~clean).any()  # a misclassified example never becomes robust
    assert all(p.grad is None and p.requires_grad for p in model.parameters())


def _binary_logistic(d=20, seed=0):
    torch.manual_seed(seed)
    w, b = torch.randn(d), torch.tensor(0.1)
    model = nn.Sequential(nn.Flatten(), nn.Linear(d, 2))
    with torch.no_grad():  # two-logit form of logistic regression: logit difference = w.x + b
        model[1].weight.copy_(torch.stack([-w / 2, w / 2]))
        model[1].bias.copy_(torch.stack([-b / 2, b / 2]))
    return model.eval(), w, b


@pytest.mark.parametrize("name, params", [
    ("fgsm", {}),
    ("mim", {"steps": 10}),
    ("cw", {"steps": 30, "step_size": 0.005}),
    ("t-pgd", {"steps": 30, "step_size": 0.005, "loss": "cw"}),
    ("apgd-ce", {"steps": 20}),
    ("fab", {"steps": 20}),
])
def test_linf_attack_reaches_exact_worst_case_of_linear_classifier(name, params):
    """CA-AT Appendix B: for binary logistic regression w.x + b under L-inf, the worst case is
    x - y * eps * sign(w) (y in {-1, +1}): every example whose margin is below eps * ||w||_1 is broken there and
    no other. Each L-inf attack whose objective is monotone in the logit difference must find exactly these."""
    model, w, b = _binary_logistic()
    d, eps = len(w), 0.05
    x = (torch.rand(400, d) * 0.8 + 0.1).view(400, 1, 4, 5)  # away from the box so the box does not bind
    flat = x.flatten(1)
    labels = (flat @ w + b > 0).long()
    flip = torch.rand(400) < 0.1
    labels[flip] = 1 - labels[flip]
    s = 2 * labels.float() - 1
    exact_robust = (flat @ w + b) * s - eps * w.abs().sum() > 0
    robust = build_attack(name, model, eps=eps, seed=0, **params).robust(x, labels)
    assert torch.equal(robust, exact_robust), (robust != exact_robust).sum()
    assert exact_robust.float().mean() < (model(x).argmax(1) == labels).float().mean()


def test_fgsm_lands_on_the_worst_case_corner():
    model, w, b = _binary_logistic()
    x = (torch.rand(50, 20) * 0.8 + 0.1).view(50, 1, 4, 5)
    labels = (x.flatten(1) @ w + b > 0).long()
    s = 2 * labels.float() - 1
    x_adv = build_attack("fgsm", model, eps=0.05).perturb(x, labels)
    assert torch.allclose(x_adv.flatten(1), x.flatten(1) - s[:, None] * 0.05 * w.sign(), atol=1e-6)


def test_mim_default_step_and_momentum_normalisation():
    model = _cnn()
    mim = build_attack("mim", model, eps=0.1)
    assert mim.step() == pytest.approx(0.01) and mim.momentum == 1.0 and mim.random_start is False
    assert build_attack("fgsm", model, eps=0.1).step() == pytest.approx(0.1)
    assert build_attack("cw", model, eps=0.1).kappa == 50.0


def test_targeted_pgd_tries_the_top_classes_in_order():
    """With one target class it only ever attacks towards the runner-up class."""
    model = _cnn()
    x = torch.rand(16, 1, 8, 8)
    with torch.no_grad():
        logits = model(x)
    y = logits.argmax(1)
    runner_up = logits.argsort(1, descending=True)[:, 1]
    x_adv = build_attack("t-pgd", model, eps=0.3, steps=20, step_size=0.05, target_classes=1, seed=0).perturb(x, y)
    with torch.no_grad():
        pred = model(x_adv).argmax(1)
    moved = pred != y
    assert moved.any() and torch.equal(pred[moved], runner_up[moved])


def test_autoattack_equals_the_authors_run_example_by_example():
    """Our ensemble (standard version, one batch) against pyautoattack's run_standard_evaluation with the same
    seed; and each component alone against run_standard_evaluation with only that attack."""
    from pyautoattack import AutoAttack

    model = _cnn(seed=1)
    x = torch.rand(32, 1, 8, 8)
    with torch.no_grad():
        y = model(x).argmax(1)
    eps = 0.02
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = build_attack("autoattack", model, eps=eps, seed=3)
        robust = ours.robust(x, y)
        reference = AutoAttack(model, eps=eps, norm="Linf", seed=3, version="standard", device="cpu")
        x_ref, _ = reference.run_standard_evaluation(x, y, batch_size=len(x))
        with torch.no_grad():
            assert torch.equal(robust, model(x_ref).argmax(1) == y)
        assert list(ours.breakdown) == list(STANDARD)
        assert ours.breakdown["square"] == int(robust.sum())
        assert 0 < robust.sum() < ours.breakdown["apgd-ce"] < len(x)  # the later components matter here
        for kind in ("apgd-ce", "apgd-dlr", "apgd-t", "fab-t"):
            alone = build_attack(kind, model, eps=eps, seed=3).robust(x, y)
            ref = AutoAttack(model, eps=eps, norm="Linf", seed=3, version="standard", device="cpu")
            ref.attacks_to_run = [kind]
            x_ref, _ = ref.run_standard_evaluation(x, y, batch_size=len(x))
            with torch.no_grad():
                assert torch.equal(alone, model(x_ref).argmax(1) == y), kind
            assert robust.sum() <= alone.sum()


class _Saved:
    def __init__(self):
        self.data, self.saves = None, []

    def load(self):
        return self.data

    def save(self, data):
        self.data = data
        self.saves.append(data["done"][-1])


def test_autoattack_resumes_from_saved_progress():
    """Progress after each component; a call that finds APGD-CE done runs only the rest, and the answer is
    the same as without interruption."""
    model = _cnn(seed=2)
    x = torch.rand(16, 1, 8, 8)
    with torch.no_grad():
        y = model(x).argmax(1)
    params = {"components": ["apgd-ce", "apgd-dlr", "fab-t"]}
    saved = _Saved()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = build_attack("autoattack", model, eps=0.03, seed=5, **params).robust(x, y, saved)
        assert saved.saves == ["apgd-ce", "apgd-dlr", "fab-t"]
        # a job killed after APGD-CE: its file holds the first save only
        first = _Saved()
        build_attack("autoattack", model, eps=0.03, seed=5, components=["apgd-ce"]).robust(x, y, first)
        first.data["components"] = params["components"]
        resumed = _Saved()
        resumed.data = first.data
        again = build_attack("autoattack", model, eps=0.03, seed=5, **params).robust(x, y, resumed)
    assert resumed.saves == ["apgd-dlr", "fab-t"]
    assert torch.equal(full, again)
    with pytest.raises(attacks.AttackError, match="another batch"):
        build_attack("autoattack", model, eps=0.03, seed=6, **params).robust(x, y, resumed)


@pytest.mark.parametrize("name", ["apgd-ce", "apgd-dlr", "apgd-t", "t-pgd", "mim", "fgsm"])
def test_training_use_without_seed_is_reproducible_and_keeps_the_global_stream(name):
    """Inside training no seed is given: the attack draws one from the global generator, so a run is
    reproducible, and the library's own reseeding does not leak into the caller's random stream."""
    model = _cnn()
    x = torch.rand(8, 1, 8, 8)
    y = torch.randint(0, 10, (8,))
    params = {"steps": 5} if name != "fgsm" else {}

    def once():
        torch.manual_seed(123)
        out = build_attack(name, model, eps=0.1, **params).perturb(x, y)
        return out, torch.rand(3)

    a, after_a = once()
    b, after_b = once()
    assert torch.equal(a, b) and torch.equal(after_a, after_b)
    torch.manual_seed(123)
    if name.startswith("apgd"):  # one draw for the seed; the library's reseeding stays inside
        torch.randint(0, 2**62, (1,))
    if name != "t-pgd":  # t-pgd draws its random starts from the global stream, as PGD does in training
        assert torch.equal(after_a, torch.rand(3))


def test_apgd_best_loss_mode_perturbs_every_example():
    model = _cnn()
    x = torch.rand(8, 1, 8, 8)
    y = (model(x).argmax(1) + 1) % 10  # all misclassified: the default mode leaves them unperturbed
    default = build_attack("apgd-ce", model, eps=0.1, steps=5, seed=0).perturb(x, y)
    best = build_attack("apgd-ce", model, eps=0.1, steps=5, seed=0, best_loss=True).perturb(x, y)
    assert torch.equal(default, x)
    assert ((best - x).flatten(1).abs().amax(1) > 0).all()
    assert (best - x).abs().max() <= 0.1 + 1e-6


def test_components_and_names():
    assert set(COMPONENTS) <= set(attacks.attack_names())
    assert STANDARD == ("apgd-ce", "apgd-t", "fab-t", "square")
    with pytest.raises(attacks.AttackError, match=r"autoattack\.components\[0\]: must be one of \[.*\], got .nope."):
        build_attack("autoattack", _cnn(), eps=0.1, components=["nope"]).perturb(torch.rand(2, 1, 8, 8),
                                                                                 torch.zeros(2, dtype=torch.long))


def test_a_resolved_spec_without_step_size_builds_every_attack():
    """The resolver writes step_size: None for attacks that have none (AutoAttack's; a budget sweep's every job):
    the one builder (attacks.from_spec) builds every attack from it, and refuses a step an attack does not take or a
    step left relative to eps (the resolver derives the step once)."""
    model = _cnn()
    for name in attacks.attack_names():
        attacks.from_spec(AttackSpec.from_dict({"type": name, "eps": 0.1, "step_size": None}), model)
    with pytest.raises(attacks.AttackError, match="step_size"):
        attacks.from_spec(AttackSpec.from_dict({"type": "square", "eps": 0.1, "step_size": 0.01}), model)
    with pytest.raises(attacks.AttackError, match="not resolved"):
        attacks.from_spec(AttackSpec.from_dict({"type": "pgd", "eps": 0.1, "step_size": "eps/4"}), model)
    seeded = attacks.from_spec(AttackSpec.from_dict({"type": "pgd", "eps": 0.1, "seed": 5}), model, seed=9)
    assert seeded.seed == 9  # an evaluation's batch seed replaces the spec's


@pytest.mark.parametrize("kind", COMPONENTS)
def test_autoattack_components_run_on_a_channels_last_model_of_colour_images(kind):
    """The evaluation runs conv nets in channels_last (tradeoff.evaluation.evaluate.channels_last): on 3-channel images their
    gradients come back in that layout, which AutoAttack's ``.view`` refused (the rehearsal scale's first CIFAR
    evaluation); 1-channel digits never showed it."""
    from tradeoff.attacks.autoattack import run_component
    from tradeoff.evaluation.evaluate import channels_last
    from tradeoff.models import create_model

    torch.manual_seed(0)
    model = create_model("small_cnn", 10, in_channels=3, image_size=8).eval()
    x, y = torch.rand(6, 3, 8, 8), torch.arange(6)
    model, x = channels_last(model, x)
    adv = run_component(kind, model, x, y, eps=8 / 255, norm="linf", seed=0, steps=2, queries=2, target_classes=2)
    assert adv.shape == x.shape and float((adv - x).abs().max()) <= 8 / 255 + 1e-6
