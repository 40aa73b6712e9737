"""The audit against known answers: models whose evaluation is known to be wrong in one way each must fail the check
that finds that way, and a plainly trained model must pass every check. Tiny models on generated data: seconds."""

from __future__ import annotations

import json
import re

import pytest
import torch
from torch import nn

from tradeoff.audit.auditor import Auditor
from tradeoff.audit.convergence import columns
from tradeoff.audit.masking import grey_budget, must_fail_budget
from tradeoff.audit.verdicts import accuracy, compare, group_verdicts, overall_line
from tradeoff.core.spec import AttackSpec, AuditSpec

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
L2 = {**PGD, "norm": "l2", "eps": 1.0, "step_size": 0.25}
SQUARE = {"type": "square", "norm": "linf", "eps": EPS, "queries": 300}
FAST = AuditSpec(step_multipliers=(1, 10), restarts=3, eps_multipliers=(0.5, 1.0), eot_draws=8, surface_examples=8,
                 surface_points=5, random_samples=16, decision_queries=200, adaptive_steps=20, adaptive_restarts=2,
                 nes_samples=8)
#: AutoAttack, made cheap: the standard components at 10 iterations, Square at 50 queries
AA = {"type": "autoattack", "norm": "linf", "eps": EPS, "steps": 10, "queries": 50}
EVERY_CHECK = ["graph", "outputs", "gradients", "consistency", "surface", "steps", "restarts", "losses", "targeted",
               "silent", "fgsm", "eps", "steps-l2", "losses-l2", "targeted-l2", "eps-l2", "autoattack", "black-box",
               "black-box-l2", "transfer", "transfer-l2", "random", "random-l2", "decision", "bpda", "bpda-l2",
               "randomness", "finite", "protocol"]


def test_every_check_is_registered_once_in_its_group_and_runs_in_order():
    """The registry (tradeoff.audit.registry) holds each check of the order, and the columns' check, under the group
    whose module registers it."""
    from tradeoff.audit.registry import CHECKS, GROUPS, ORDER

    assert list(ORDER) == EVERY_CHECK and set(CHECKS) == {*ORDER, "columns"}
    assert all(c.run.__module__ == GROUPS[c.group] for c in CHECKS.values())


def _auditor(model, test_set, *, attack=PGD, settings=FAST, **kw) -> Auditor:
    """An auditor of the checks' known answers; AutoAttack left out of its suite unless given (its cost)."""
    x, y = test_set
    return Auditor(model, x, y, attack=attack, black_box=kw.pop("black_box", SQUARE), settings=settings,
                   autoattack=kw.pop("autoattack", None), **kw)


def _audit(model, test_set, **kw) -> dict[str, dict]:
    return {c["name"]: c for c in _auditor(model, test_set, **kw).run()}


def _checks(auditor: Auditor, *names: str) -> dict[str, dict]:
    """Only some checks, in the order the audit runs them (each as ``run`` guards it)."""
    auditor.clean()
    return {name: auditor.run_check(name) for name in names}


def test_a_plainly_trained_model_passes_every_check(plain, surrogate, test_set):
    """Every check runs, on both norms, and passes; only the BPDA probe, whose premise (a gradient that fails) is
    absent, is n/a; the three verdicts pass, and so does the reported column its own attack measures."""
    auditor = _auditor(plain, test_set, surrogate=surrogate, l2=L2, autoattack=AA,
                       protocol=[("pgd20", {**PGD, "steps": 20}, "pgd10", PGD)])
    auditor.reported = {"pgd10": {"spec": PGD, "flags": auditor.base()}}
    auditor.flags["column pgd10"], auditor.specs["column pgd10"] = auditor.base(), AttackSpec.from_dict(PGD)
    found = auditor.run()
    checks = {c["name"]: c for c in found}
    assert [c["name"] for c in found] == EVERY_CHECK + ["column pgd10"]
    assert {n: c["verdict"] for n, c in checks.items()} == {n: "skip" if n.startswith("bpda") else "pass"
                                                            for n in checks}
    assert group_verdicts(found) == {"masking": "pass", "convergence": "pass", "protocol": "pass"}
    assert overall_line(group_verdicts(found)) == "pass"
    assert checks["eps"]["numbers"]["curve"][-2:] == [(0.5, 0.0), (1.0, 0.0)]  # the mid-grey and whole-range budgets
    assert checks["eps-l2"]["numbers"]["must_fail_eps"] == 8.0 and checks["eps-l2"]["numbers"]["curve"][-1][1] == 0.0
    assert all(not c["next"] for c in found)  # a next step only for a finding


@pytest.fixture(scope="module")
def quantised(surrogate, test_set):
    """The checks of a model behind input quantisation (rounding has a zero gradient: shattered gradients, PGD
    never moves it)."""
    return _audit(_train(Net(front=lambda x: torch.round(x * 2) / 2)), test_set, surrogate=surrogate)


def test_a_quantised_input_layer_fails_masking_and_the_gradient_checks_lose_their_premise(quantised):
    checks = quantised
    assert checks["gradients"]["verdict"] == "fail"
    assert checks["gradients"]["numbers"]["zero_fraction"] == 1.0
    for name in ("surface", "steps", "restarts", "silent", "consistency"):  # premise gone: n/a, not a pass
        assert checks[name]["verdict"] == "skip", name
    assert checks["losses"]["verdict"] == "skip"  # CE, CW and DLR all 100%: no finding, and no premise
    assert group_verdicts(list(checks.values()))["masking"] == "fail"
    assert all(c["next"] for c in checks.values() if c["verdict"] in ("warn", "fail"))  # a next step per finding


def test_a_quantised_input_layer_fails_the_straight_through_probe(quantised):
    """BPDA through the rounding (the identity backward, found without naming it) with APGD breaks what the zero
    gradient cannot move."""
    bpda = quantised["bpda"]
    assert bpda["verdict"] == "fail" and bpda["numbers"]["accuracy"] < bpda["numbers"]["white_box"] - 0.1
    assert any(a.startswith("BPDA-APGD-CE") for a in bpda["numbers"]["attacks"]) and "BPDA" in bpda["next"]


class Staged(nn.Module):
    """A model that names its non-differentiable part: classifier(preprocess(x)), the preprocess a quantiser."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def preprocess(self, x):
        return torch.round(x * 4) / 4

    def classifier(self, x):
        return self.net(x)

    def forward(self, x):
        return self.classifier(self.preprocess(x))


def test_a_named_preprocess_is_attacked_through_bpda(plain, test_set):
    checks = _checks(_auditor(Staged(plain), test_set), "gradients", "bpda")
    assert checks["gradients"]["verdict"] == "fail"
    assert checks["bpda"]["verdict"] == "fail" and "BPDA-APGD" in checks["bpda"]["summary"]


def test_a_reversed_gradient_fails_the_surface_check(plain, test_set):
    """The identity forward with a negated backward: the gradient is non-zero and points downhill."""
    reversed_grad = Wrapped(plain, lambda x: 2 * x.detach() - x)
    checks = _checks(_auditor(reversed_grad, test_set), "gradients", "surface")
    assert checks["gradients"]["verdict"] == "pass" and checks["surface"]["verdict"] == "fail"
    assert checks["surface"]["numbers"]["wins"] == 0


def test_a_steep_sigmoid_input_layer_fails_the_gradient_and_budget_checks(test_set):
    """A saturating input layer: sigmoid(1000 (x - 1/2)) has a gradient that underflows to zero away from 1/2; at the
    whole-range budget PGD cannot reach a wrong class, in either norm."""
    model = _train(Net(front=lambda x: torch.sigmoid(1000 * (x - 0.5))))
    checks = _checks(_auditor(model, test_set, l2=L2), "gradients", "eps", "eps-l2")
    assert checks["gradients"]["verdict"] == "fail"
    assert checks["eps"]["verdict"] == "fail" and checks["eps"]["numbers"]["curve"][-1][0] == 1.0
    assert checks["eps-l2"]["verdict"] == "fail"


def test_scaled_logits_fail_the_loss_check_where_cw_and_dlr_still_work(test_set):
    """Logits x 1e4: the cross-entropy saturates and its gradient vanishes; the margin and DLR losses are unharmed."""
    scaled = _train(Net())
    scaled.scale = 1e4
    checks = _checks(_auditor(scaled, test_set), "gradients", "losses", "targeted")
    assert checks["targeted"]["verdict"] == "fail"  # the targeted margin is unharmed too: multi-targeted beats PGD
    losses = checks["losses"]
    assert losses["verdict"] == "fail"
    assert losses["numbers"]["accuracies"]["ce"] > losses["numbers"]["accuracies"]["cw"] + 0.2
    assert checks["gradients"]["verdict"] == "fail"


class Wrapped(nn.Module):
    """``model(front(x))`` for a front that is not a plain function of a layer (detach, randomness)."""

    def __init__(self, model, front):
        super().__init__()
        self.model, self.front = model, front

    def forward(self, x):
        return self.model(self.front(x))


def test_a_broken_graph_is_a_verdict_not_a_traceback(plain, test_set):
    """A wrapper that detaches its input: every gradient attack would raise; the graph check fails, the gradient
    checks are n/a, the gradient-free ones still run."""
    checks = _audit(Wrapped(plain, lambda x: x.detach()), test_set)
    assert checks["graph"]["verdict"] == "fail" and checks["graph"]["next"]
    for name in ("gradients", "surface", "steps", "restarts", "losses", "targeted", "silent", "eps"):
        assert checks[name]["verdict"] == "skip", name
    assert checks["black-box"]["verdict"] != "skip"
    assert group_verdicts(list(checks.values()))["masking"] == "fail"


def test_softmax_outputs_fail_the_outputs_check(plain, test_set):
    checks = _checks(_auditor(nn.Sequential(plain, nn.Softmax(dim=1)), test_set), "outputs")
    assert checks["outputs"]["verdict"] == "fail" and checks["outputs"]["numbers"]["probabilities"]
    assert _checks(_auditor(plain, test_set), "outputs")["outputs"]["verdict"] == "pass"


@pytest.mark.parametrize("amplitude,verdict", [(0.02, "fail"), (0.002, "warn")])
def test_a_high_frequency_wrapper_has_gradients_that_do_not_predict_the_loss(plain, test_set, amplitude, verdict):
    """x + a sin(1000 x): the gradient is large and turns under tiny noise; the loss does not rise as it predicts."""
    wrapped = Wrapped(plain, lambda x: x + amplitude * torch.sin(1000 * x))
    checks = _checks(_auditor(wrapped, test_set), "gradients", "consistency")
    assert checks["gradients"]["verdict"] == "pass"  # nothing vanishes: the old checks' blind spot
    assert checks["consistency"]["verdict"] == verdict


def _marked(test_set, every: int):
    """The test set with pixel 0 set to 0 on every ``every``-th example (1 elsewhere), and a model whose gradient is
    detached on inputs whose pixel 0 is below 1/2: masking on that subset only (an attack within eps < 1/2 never
    leaves it)."""
    x, y = test_set
    marked = x.clone().flatten(1)
    marked[:, 0] = 1.0
    marked[::every, 0] = 0.0

    def front(z):
        mask = (z.flatten(1)[:, :1] < 0.5).float().view(-1, 1, 1, 1)
        return mask * z.detach() + (1 - mask) * z

    return front, (marked.view_as(x), y)


@pytest.mark.parametrize("every,tolerance,verdict", [(5, 0.02, "fail"), (25, 0.03, "warn")])
def test_masking_on_a_subset_is_found_per_example(plain, surrogate, test_set, every, tolerance, verdict):
    """The transfer attack breaks examples of the masked subset that no white-box attack breaks; in aggregate it is
    far weaker than the white box (which alone would pass), per example it is not."""
    front, marked = _marked(test_set, every)
    auditor = _auditor(Wrapped(plain, front), marked, surrogate=surrogate,
                       settings=FAST.replace(tolerance=tolerance))
    auditor.base()
    checks = _checks(auditor, "gradients", "transfer")
    transfer = checks["transfer"]
    assert transfer["verdict"] == verdict and transfer["numbers"]["only_breaks"] > 0
    assert transfer["numbers"]["accuracy"] > transfer["numbers"]["white_box"]  # the aggregate comparison passes
    if verdict == "warn":
        assert checks["gradients"]["verdict"] == "warn"  # 4% all-zero: some, below the 5% that fails


def test_a_randomized_model_fails_the_spread_half_of_the_randomness_check(test_set):
    """Gaussian noise on the input of every forward pass: one draw's predictions are not the model's."""
    noisy = _train(Net(front=lambda x: x + 0.8 * torch.randn_like(x)))
    checks = _checks(_auditor(noisy, test_set), "randomness", "autoattack")
    assert checks["randomness"]["verdict"] == "fail"
    assert checks["randomness"]["numbers"]["halves"]["spread"] == "fail"
    assert checks["randomness"]["numbers"]["spread"] > FAST.tolerance
    assert checks["autoattack"]["verdict"] == "warn"  # AutoAttack's own check_randomized
    assert any("randomized" in w for w in checks["autoattack"]["numbers"]["warnings"])


def test_random_gradients_fail_the_eot_half_with_draws_sized_from_their_variance(plain, test_set):
    """Outputs that never vary, gradients multiplied by 1 + 10 N(0, 1) per pixel: one draw's PGD is lost, EOT over
    the draws the variance asks for (more than the configured least) breaks the model."""
    def front(x):
        noise = 1 + 10 * torch.randn_like(x)
        return x * noise - (x * noise).detach() + x.detach()

    randomness = _checks(_auditor(Wrapped(plain, front), test_set), "randomness")["randomness"]
    assert randomness["numbers"]["halves"] == {"spread": "pass", "eot": "fail"}
    assert randomness["verdict"] == "fail" and randomness["numbers"]["eot_draws"] > FAST.eot_draws


def test_slight_randomness_warns(plain, test_set):
    randomness = _checks(_auditor(Wrapped(plain, lambda x: x + 0.01 * torch.randn_like(x)), test_set),
                         "randomness")["randomness"]
    assert randomness["verdict"] == "warn" and randomness["numbers"]["varies"] and randomness["next"]


def test_a_defence_that_reseeds_its_randomness_every_pass_warns(plain, test_set):
    """torch.manual_seed(0) in the forward pass: every pass draws the same noise, so the outputs never vary."""
    def front(x):
        torch.manual_seed(0)
        return x + 0.3 * torch.randn_like(x)

    randomness = _checks(_auditor(Wrapped(plain, front), test_set), "randomness")["randomness"]
    assert randomness["verdict"] == "warn" and randomness["numbers"]["reseeded"]
    assert torch.initial_seed() is not None


WEAK = {**PGD, "steps": 1, "step_size": EPS / 10}


def test_a_weak_attack_fails_convergence_and_its_protocol_and_column_are_named(plain, test_set):
    """PGD-1 of eps/10: APGD and the strong protocol attack beat it; the reported column it measured stands above the
    best known robust accuracy, which the headline gives."""
    auditor = _auditor(plain, test_set, attack=WEAK, protocol=[("pgd10", PGD, "pgd1-weak", WEAK)])
    weak = auditor.base()
    auditor.reported = {"weak": {"spec": WEAK, "flags": weak}}
    auditor.flags["column weak"], auditor.specs["column weak"] = weak, AttackSpec.from_dict(WEAK)
    checks = _checks(auditor, "steps", "protocol")
    checks.update({c["name"]: c for c in columns(auditor)})
    assert checks["steps"]["verdict"] == "fail" and "APGD-CE" in checks["steps"]["next"]
    assert checks["protocol"]["verdict"] == "fail"
    pair = checks["protocol"]["numbers"]["pairs"][0]
    assert pair["protocol_accuracy"] > pair["strong_accuracy"]
    column = checks["column weak"]
    best = auditor.headline()[f"linf {EPS:.4g}"]["accuracy"]
    assert column["verdict"] == "fail" and column["numbers"]["best_known"] == best < accuracy(weak) - 0.1
    assert column["numbers"]["only_base_robust"] > 0 and column["numbers"]["p"] < 0.05
    assert f"{100 * best:.1f}%" in column["next"]
    assert group_verdicts(list(checks.values())) == {"masking": "skip", "convergence": "fail", "protocol": "fail"}


def test_restarts_that_keep_breaking_examples_fail(plain, test_set):
    """x + 0.2 sin(15 x) in front of the plain model: a loss with many local maxima, where each fresh random start
    breaks other examples (the restart curve keeps falling)."""
    wavy = Wrapped(plain, lambda x: x + 0.2 * torch.sin(15 * x))
    restarts = _checks(_auditor(wavy, test_set, settings=FAST.replace(restarts=5)),
                       "restarts")["restarts"]
    curve = restarts["numbers"]["curve"]
    assert restarts["verdict"] == "fail" and len(curve) == 5 and curve[-1][1] < curve[0][1] - 0.05
    assert not restarts["numbers"]["flattened"]
    assert _checks(_auditor(plain, test_set), "restarts")["restarts"]["verdict"] == "pass"


def test_few_examples_make_material_gaps_warnings(plain, test_set):
    """On 6 test examples a weak attack's gaps are material but not significant: warn, not fail."""
    x, y = test_set
    auditor = _auditor(plain, (x[:6], y[:6]), attack=WEAK, protocol=[("pgd10", PGD, "pgd1-weak", WEAK)])
    weak = auditor.base()
    auditor.reported = {"weak": {"spec": WEAK, "flags": weak}}
    auditor.flags["column weak"], auditor.specs["column weak"] = weak, AttackSpec.from_dict(WEAK)
    checks = _checks(auditor, "steps", "protocol")
    checks.update({c["name"]: c for c in columns(auditor)})
    assert {n: c["verdict"] for n, c in checks.items()} == {"steps": "warn", "protocol": "warn", "column weak": "warn"}


def test_a_silent_success_is_counted_and_the_loss_trace_kept(plain, test_set):
    """x + 0.2 sin(30 x) in front of the plain model, sign-PGD with a step of the whole budget: it passes through
    adversarial points and leaves them; the best iterate keeps them."""
    wavy = Wrapped(plain, lambda x: x + 0.2 * torch.sin(30 * x))
    auditor = _auditor(wavy, test_set, attack={**PGD, "step_size": EPS})
    silent = _checks(auditor, "silent")["silent"]
    assert silent["numbers"]["silent"] > 0.02 * len(test_set[1]) and silent["verdict"] == "fail"
    trace = auditor.loss_trace
    assert trace["steps"] == list(range(1, 11)) and len(trace["losses"]) == FAST.surface_examples
    assert all(len(row) == 10 for row in trace["losses"])
    assert _checks(_auditor(plain, test_set), "silent")["silent"]["verdict"] == "pass"


def test_the_attack_option_best_iterate_leaves_the_default_unchanged(plain, test_set):
    """PGD's ``best_iterate`` and ``keep_trace``: off by default (the tables' numbers), the same steps when on."""
    from tradeoff.attacks import from_spec
    from tradeoff.core.spec import AttackSpec

    x, y = test_set
    plain_adv = from_spec(AttackSpec.from_dict(PGD), plain, seed=3).perturb(x, y)
    traced = from_spec(AttackSpec.from_dict(PGD), plain, seed=3)
    traced.keep_trace = True
    assert torch.equal(traced.perturb(x, y), plain_adv) and traced.loss_trace.shape == (10, len(x))
    best = from_spec(AttackSpec.from_dict(PGD), plain, seed=3)
    best.best_iterate = True
    best_adv = best.perturb(x, y)
    with torch.no_grad():
        assert (plain(best_adv).argmax(1) != y).sum() >= (plain(plain_adv).argmax(1) != y).sum()


def test_the_python_entry_point_writes_a_page_that_opens_with_the_verdicts(plain, test_set, tmp_path):
    """docs/audit.md's example: an Auditor on any module, its record and page; the best known robust accuracy first,
    then one line per group and the overall line; a next step beside each finding."""
    from tradeoff.audit.page import write_page
    from tradeoff.audit.run import make_record

    weak = {**PGD, "steps": 1, "step_size": EPS / 10}
    auditor = Auditor(plain, *test_set, attack=weak, black_box=None, settings=FAST, autoattack=AA)
    checks = auditor.run()
    paths = write_page(make_record(auditor, checks, {"model": "mine"}, seconds=1.0, device="cpu"),
                       {k: tmp_path / f"mine.{k}" for k in ("md", "html", "png", "pdf", "json")})
    page = paths["md"].read_text().splitlines()
    assert page[2].startswith("**Best known robust accuracy") and "% at linf eps 0.25" in page[2]
    assert page[4] == "- **masking: pass**" and page[5].startswith("- **convergence: fail (steps")
    assert page[6] == "- **protocol: n/a**" and page[7] == "- **overall: fail (convergence)**"
    row = next(line for line in page if line.startswith("| convergence | PGD-1 against APGD-CE"))
    assert "report APGD-CE" in row and json.loads(paths["json"].read_text())["overall"] == "fail (convergence)"


def test_table_notes_name_the_columns_an_audit_found_overstated(tmp_path):
    from types import SimpleNamespace

    from tradeoff.report.records import audit_notes
    from tradeoff.storage.layout import Layout

    layout = Layout.of(tmp_path, "smoke")
    catalog = SimpleNamespace(layout=layout, train_id={})
    record = {"best_known": {"linf 0.3": {"accuracy": 0.147}}, "checks": [
        {"name": "column pgd20", "verdict": "fail", "numbers": {"column": "pgd20", "gap": 0.167}},
        {"name": "column aa", "verdict": "pass", "numbers": {"column": "aa", "gap": 0.011}}]}
    layout.audit("m")["json"].parent.mkdir(parents=True)
    layout.audit("m")["json"].write_text(json.dumps(record))
    assert audit_notes(catalog, {"AT": "m", "TRADES": "unaudited"}) == [
        "The audit of AT (audit/m.md) finds pgd20 (+16.7 points) above its best known robust accuracy, 14.7% (the "
        "per-example worst case over every attack measured at the budget)."]


class Scripted(Auditor):
    """An auditor whose attacks' outcomes are given (``script``: a function of the label and spec giving the flags):
    the rules' warn paths on outcomes no small model gives on demand."""

    def __init__(self, plain, test_set, script, **kw):
        super().__init__(plain, *test_set, attack=PGD, black_box=None, settings=FAST, **kw)
        self.script = script

    def measure(self, label, spec, seed=None):
        if label not in self.flags:
            self.flags[label], self.specs[label] = self.script(label, spec.as_dict()), spec
        return self.flags[label]


def _flags(n: int, robust: int) -> str:
    return "1" * robust + "0" * (n - robust)


def test_accuracy_that_rises_with_the_budget_warns(plain, test_set):
    """A curve at 0 at the bounds' budgets that rises between two smaller ones: warn, not fail."""
    n = len(test_set[1])
    by_eps = {0.125: 150, 0.25: 200, 0.5: 0, 1.0: 0}
    auditor = Scripted(plain, test_set, lambda label, spec: _flags(n, n if spec["type"] == "clean" else
                                                                  by_eps[spec["eps"]]))
    eps = _checks(auditor, "eps")["eps"]
    assert eps["verdict"] == "warn" and eps["next"]
    by_eps[0.25] = 100
    assert _checks(Scripted(plain, test_set, auditor.script), "eps")["eps"]["verdict"] == "pass"


def test_a_restart_curve_still_falling_at_its_end_warns(plain, test_set):
    """Restarts that each break a few more examples, fewer than the tolerance in all, the last still some: warn."""
    n = len(test_set[1])
    newly = {1: [], 2: [0], 3: [1, 2]}  # the examples each restart breaks (the last: 2, more than 1.5)

    def script(label, spec):
        if spec["type"] == "clean":
            return _flags(n, n)
        r = int(label.rsplit(" ", 1)[1]) if "restart" in label else 1
        return "".join("0" if i in newly[r] else c for i, c in enumerate(_flags(n, 100)))

    restarts = _checks(Scripted(plain, test_set, script), "restarts")["restarts"]
    assert restarts["verdict"] == "warn" and restarts["numbers"]["added"] == [1, 2]
    assert "still falling" in restarts["summary"]


def test_apgd_still_falling_with_more_iterations_warns(plain, test_set):
    """PGD as strong as APGD at its most iterations, APGD at its fewest materially weaker: the attack's column is
    fine, APGD itself had not converged: warn."""
    n = len(test_set[1])
    robust = {"PGD-10": 100, "APGD-CE-10": 120, "APGD-CE-100": 100}
    steps = _checks(Scripted(plain, test_set, lambda label, spec: _flags(n, n if spec["type"] == "clean" else
                                                                           robust[label])), "steps")["steps"]
    assert steps["verdict"] == "warn" and steps["numbers"]["apgd_gap"] > FAST.tolerance


def test_compare_needs_a_material_and_significant_gap():
    assert compare("1" * 100, "1" * 99 + "0", 0.02, 0.05)[0] == "pass"       # 1 point: below the tolerance
    assert compare("1" * 100, "1" * 90 + "0" * 10, 0.02, 0.05)[0] == "fail"  # 10 of 10 discordant: p = 0.001
    assert compare("1" * 10, "1" * 7 + "0" * 3, 0.02, 0.05)[0] == "warn"     # 30 points but 3 of 3: p = 0.125
    assert compare("0" * 10 + "1" * 90, "1" * 90 + "0" * 10, 0.02, 0.05)[0] == "pass"  # same accuracy, other examples


def test_the_bounds_budgets():
    x = torch.zeros(2, 1, 8, 8)
    assert (grey_budget("linf", x), must_fail_budget("linf", x)) == (0.5, 1.0)
    assert (grey_budget("l2", x), must_fail_budget("l2", x)) == (4.0, 8.0)


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
    model = models.create_model("small_cnn", 10, in_channels=1, image_size=8)
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
    assert page[0] == "# Audit of scaled (smoke scale)" and page[2].startswith("**No trustworthy figure: masking**")
    assert page[4].startswith("- **masking: fail (") and page[5].startswith("- **convergence: ")
    assert page[6].startswith("- **protocol: ") and page[7].startswith("- **overall: fail (masking")
    out = capsys.readouterr().out
    assert "scaled / gradients: fail" in out and "scaled: masking: fail (" in out and "-> next: " in out

    assert cli.main(configs + ["summary"]) == 0
    summary = results_of(work).summary()["md"].read_text()
    assert "## Failed audit checks" in summary and "- scaled / gradients: " in summary

    # one clear line, before any work: a run whose model is not trained, options that need --checkpoint
    assert cli.main(configs + ["audit", "--run", "cifar10-resnet18-nt"]) == 1
    assert "no such model file" in capsys.readouterr().err
    assert cli.main(configs + ["audit", "--run", "cifar10-resnet18-nt", "--arch", "small_cnn"]) == 2
    assert cli.main(configs + ["audit"]) == 2


MASKED_MODEL = '''
import torch
from torch import nn


class Quantised(nn.Module):
    """A linear classifier behind input quantisation: its gradient is zero everywhere."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))

    def forward(self, x):
        return self.net(torch.round(x * 2) / 2)


def build():
    return Quantised()
'''


def test_a_model_from_the_users_python_file_is_audited_and_evaluated(tmp_path, monkeypatch, capsys):
    """`audit --model FILE.py:FUNCTION --dataset D` and `evaluate --model ...`: the function's module, audited like any
    other (a quantised input: masking fails), its record naming the file, its SHA-256 and the function."""
    from helpers import results_of

    from tradeoff import cli

    work, configs = _workflow(tmp_path)
    monkeypatch.chdir(work)
    (tmp_path / "mine.py").write_text(MASKED_MODEL)
    model = f"{tmp_path / 'mine.py'}:build"
    assert cli.main(configs + ["evaluate", "--model", model, "--dataset", "digits", "--name", "masked",
                               "--attack", "pgd20"]) == 0
    metrics = json.loads(results_of(work).metrics("masked", "pgd20").read_text())
    assert metrics["external"]["layout"] == "python" and metrics["examples"] == 64
    capsys.readouterr()

    assert cli.main(configs + ["audit", "--model", model, "--dataset", "digits", "--name", "masked"]) == 0
    out = capsys.readouterr().out
    assert "masked: masking: fail (" in out and "masked / gradients: fail" in out
    record = json.loads(results_of(work).audit("masked")["json"].read_text())
    assert record["arch"] == "python:build" and record["external"]["layout"] == "python"
    assert record["external"]["function"] == "build" and len(record["external"]["sha256"]) == 64
    assert record["groups"]["masking"] == "fail"
    column = next(c for c in record["checks"] if c["name"] == "column pgd20")  # what evaluate measured, audited
    assert column["numbers"]["accuracy"] == metrics["accuracy"] and column["numbers"]["best_known"] <= \
        metrics["accuracy"]

    # one clear line: no such file, no such function, not a module, options of --checkpoint
    assert cli.main(configs + ["audit", "--model", f"{tmp_path / 'none.py'}:build", "--dataset", "digits"]) == 1
    assert "no such file" in capsys.readouterr().err
    assert cli.main(configs + ["audit", "--model", f"{model[:-len('build')]}make", "--dataset", "digits"]) == 1
    assert "no function 'make'" in capsys.readouterr().err
    (tmp_path / "bad.py").write_text("def build():\n    return 3\n")
    assert cli.main(configs + ["audit", "--model", f"{tmp_path / 'bad.py'}:build", "--dataset", "digits"]) == 1
    assert "not a torch.nn.Module" in capsys.readouterr().err
    assert cli.main(configs + ["audit", "--model", model, "--dataset", "digits", "--arch", "small_cnn"]) == 2
    assert cli.main(configs + ["audit", "--model", model]) == 2


def test_a_plain_demo_scale_model_passes_masking():
    """The demo's architecture (small_cnn) trained plainly on the digits for a few seconds, audited with the demo's
    attack (PGD-20 at L-inf 0.3, step 0.075, and L2 1.5): every masking check passes."""
    from helpers import data_root

    from tradeoff import data, models

    ds = data.load("digits", data_root())
    torch.manual_seed(0)
    model = models.create_model("small_cnn", 10, in_channels=1, image_size=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model.train()
    for epoch in range(4):
        for start in range(0, len(ds.x_train), 64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(ds.x_train[start:start + 64]), ds.y_train[start:start + 64]).backward()
            opt.step()
    model.eval()
    attack = {"type": "pgd", "norm": "linf", "eps": 0.3, "steps": 20, "step_size": 0.075, "random_start": True,
              "restarts": 1}
    square = {"type": "square", "norm": "linf", "eps": 0.3, "queries": 100}
    auditor = Auditor(model, ds.x_test[:100], ds.y_test[:100], attack=attack, black_box=square, settings=FAST,
                      l2={**attack, "norm": "l2", "eps": 1.5, "step_size": 0.375})
    found = auditor.run()
    assert auditor.curves()["clean"] > 0.8
    masking = {c["name"]: c["verdict"] for c in found if c["group"] == "masking"}
    assert group_verdicts(found)["masking"] == "pass", masking


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
    from tradeoff.audit.jobs import audited_models, surrogate_for
    from tradeoff.pipeline import dvc_export as dvc
    from tradeoff.pipeline.costs import format_plan, plan

    work, _ = _workflow(tmp_path)
    files = [str(work / f) for f in (*SMOKE, "config/local.yaml")]
    catalog = tcfg.load_catalog(files)
    models = audited_models(catalog, "table1a")
    assert len(models) == 9 and models[1] == "cifar10-resnet18-at-beta1"
    assert surrogate_for(catalog, models[1]) == "cifar10-resnet18-trades-lambda6"  # never the model itself

    dry = run(["snakemake", "-n", "--cores", "1", "audit_table1a", "--configfile", *SMOKE, "config/local.yaml"],
              work).stdout
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", dry, re.M))
    # each audit runs after the evaluations of the columns the tables report for its model, which it holds to its
    # best known figure (the model's evaluation job at the smoke scale: one per model)
    assert counts["audit"] == "9" and counts["audit_table1a"] == "1" and counts["evaluate"] == "9"

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
