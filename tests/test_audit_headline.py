"""The audit's headline (issue 37, point 4): a figure a defence author can quote, or, where masking fails, "no
trustworthy figure: masking" and the best adaptive figure as an upper bound only; a budget where nothing ran is "not
measured"; probes on batches; every measurement's per-example flags written beside the page, from which the headline
is re-derived; AutoAttack in the suite; a randomized model judged by the majority of its draws; the attacks' warnings,
invalid examples and non-finite logits on the record and the page. Tiny models on generated data (tests/test_audit.py's
known-answer models)."""

from __future__ import annotations

import json

import pytest
import torch
from test_audit import AA, EPS, L2, Net, Wrapped, _auditor, _checks, _data, _train
from torch import nn

from tradeoff.audit.page import read_flags, write_page
from tradeoff.audit.run import make_record
from tradeoff.audit.verdicts import accuracy, both


@pytest.fixture(scope="module")
def test_set():
    return _data(300, seed=2)


@pytest.fixture(scope="module")
def plain():
    return _train(Net())


def _page(auditor, tmp_path, name="m"):
    checks = auditor.run()
    record = make_record(auditor, checks, {"model": name}, seconds=0.0, device="cpu")
    paths = write_page(record, {k: tmp_path / f"{name}.{s}" for k, s in (
        ("md", "md"), ("html", "html"), ("png", "png"), ("pdf", "pdf"), ("json", "json"), ("flags", "flags.json.gz"))})
    return record, paths


def test_a_quantised_model_leads_with_no_trustworthy_figure_and_its_straight_through_bound(test_set, tmp_path):
    """round(4x)/4 in front of the model (a 2-bit quantiser: zero gradient everywhere): masking fails, so the page
    opens with "No trustworthy figure: masking" and gives the best adaptive figure as an upper bound, never in bold;
    the straight-through APGD (BPDA through the rounding, found without naming it, with restarts) reaches well below
    the figure the gradient attacks leave, and the upper bound is at most it."""
    model = _train(Net(front=lambda x: torch.round(x * 4) / 4))
    auditor = _auditor(model, test_set, l2=L2)
    record, paths = _page(auditor, tmp_path)
    assert record["trustworthy"] is False and record["no_trustworthy_figure"] == "masking"
    assert "gradients" in record["masking_failed"]
    bound = record["best_known"][f"linf {EPS:.4g}"]
    assert bound["bound"] == "upper bound" and not bound["trustworthy"]
    st = [lb for lb in bound["attacks"] if lb.startswith("BPDA-APGD-CE")]
    assert st, bound["attacks"]
    assert accuracy(auditor.flags[st[0]]) < accuracy(auditor.flags["PGD-10"]) - 0.1  # straight-through breaks more
    assert bound["accuracy"] <= accuracy(auditor.flags[st[0]])
    page = paths["md"].read_text().splitlines()
    assert page[2].startswith("**No trustworthy figure: masking** (fails: ") and "upper bound only" in page[2]
    assert f"at most {100 * bound['accuracy']:.1f}% at linf" in page[2]
    assert f"**{100 * bound['accuracy']:.1f}" not in page[2] and page[2].count("**") == 2  # the number never bold
    assert "No trustworthy figure: masking" in paths["html"].read_text()


def test_a_plain_model_keeps_its_quotable_headline(plain, test_set, tmp_path):
    record, paths = _page(_auditor(plain, test_set), tmp_path)
    assert record["trustworthy"] is True and record["best_known"][f"linf {EPS:.4g}"]["bound"] == "best known"
    assert paths["md"].read_text().splitlines()[2].startswith("**Best known robust accuracy")


def test_a_budget_where_nothing_ran_is_not_measured_never_the_clean_accuracy(plain, test_set, tmp_path):
    """The L2 budget before any L2 attack has run: its headline says "not measured" (it used to read the clean
    accuracy: the worst case over no attack starts from the clean flags)."""
    auditor = _auditor(plain, test_set, l2=L2)
    _checks(auditor, "graph", "steps")
    head = auditor.headline()
    assert head[f"l2 {L2['eps']:.4g}"] == {"norm": "l2", "eps": L2["eps"], "accuracy": None, "measured": False,
                                           "trustworthy": False, "bound": "not measured", "attacks": []}
    assert head[f"linf {EPS:.4g}"]["measured"] and head[f"linf {EPS:.4g}"]["accuracy"] < auditor.curves()["clean"]
    from tradeoff.audit.page import headline

    assert "not measured at l2 eps 1" in headline({"best_known": head, "trustworthy": True})


def test_a_detached_graph_is_measured_at_both_budgets_by_the_gradient_free_and_adaptive_attacks(plain, test_set):
    """A wrapper that detaches its input: no gradient attack runs, yet neither budget reads the clean accuracy: the
    L2 suite (Square-L2, random sampling, BPDA through the detach) measures it, as the L-inf one does."""
    auditor = _auditor(Wrapped(plain, lambda x: x.detach()), test_set, l2=L2)
    auditor.run()
    head = auditor.headline()
    clean = auditor.curves()["clean"]
    for key in (f"linf {EPS:.4g}", f"l2 {L2['eps']:.4g}"):
        assert head[key]["measured"] and head[key]["bound"] == "upper bound", key
        assert any(lb.startswith(("Square", "random sampling")) for lb in head[key]["attacks"]), key
    assert head[f"linf {EPS:.4g}"]["accuracy"] < clean - 0.2  # BPDA through the detach breaks it as PGD breaks plain
    assert any(lb.startswith("BPDA-APGD") for lb in head[f"linf {EPS:.4g}"]["attacks"])


class RefusesOne(nn.Module):
    """A model that refuses a batch of one image (as some batch-statistics defences do)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        if len(x) < 2:
            raise ValueError("this defence needs a batch of at least two images")
        return self.model(x)


def test_probes_run_on_batches_a_model_that_refuses_batch_size_one_is_not_called_masked(plain, test_set):
    checks = _checks(_auditor(RefusesOne(plain), test_set, l2=L2), "graph", "outputs", "gradients", "losses",
                     "targeted", "eps", "eps-l2", "random", "decision", "finite")
    assert {n: c["verdict"] for n, c in checks.items()} == dict.fromkeys(checks, "pass")


def test_the_flags_beside_the_page_re_derive_the_headline(plain, test_set, tmp_path):
    """Every measurement's per-example flags, compressed beside the record: the headline at each budget is the AND of
    the flags of the measurements it names."""
    record, paths = _page(_auditor(plain, test_set, l2=L2), tmp_path)
    assert paths["flags"].name == "m.flags.json.gz"
    flags = read_flags(paths["flags"])
    assert set(flags) == set(record["measurements"])
    for key, head in record["best_known"].items():
        derived = "1" * record["examples"]
        for label in head["attacks"]:
            derived = both(derived, flags[label])
        assert head["attacks"][0] == "clean" and accuracy(derived) == head["accuracy"], key
    assert json.loads(paths["json"].read_text())["flags_file"] == "m.flags.json.gz"
    assert paths["flags"].stat().st_size < sum(map(len, flags.values())) / 4  # compressed bits, not characters


def test_the_suite_includes_autoattack_so_the_headline_is_never_above_it(plain, test_set):
    auditor = _auditor(plain, test_set, l2=L2, autoattack=AA)
    check = _checks(auditor, "autoattack")["autoattack"]
    assert set(check["numbers"]["accuracies"]) == {"AutoAttack", "AutoAttack L2"}
    head = auditor.headline()
    assert "AutoAttack" in head[f"linf {EPS:.4g}"]["attacks"] and "AutoAttack L2" in head[f"l2 {L2['eps']:.4g}"][
        "attacks"]
    assert head[f"linf {EPS:.4g}"]["accuracy"] <= check["numbers"]["accuracies"]["AutoAttack"]


def test_a_randomized_model_is_judged_by_the_majority_of_its_draws(test_set):
    """Gaussian noise on the input of every pass: one draw's outcome is not the model's, so the headline is the
    per-example worst case over the measurements judged by the majority vote (EOT's), not over single draws."""
    noisy = _train(Net(front=lambda x: x + 0.8 * torch.randn_like(x)))
    auditor = _auditor(noisy, test_set, l2=L2)
    found = {c["name"]: c for c in auditor.run()}
    assert found["randomness"]["verdict"] == "fail" and auditor.randomized
    head = auditor.headline()[f"linf {EPS:.4g}"]
    assert head["attacks"] and all("majority of" in lb for lb in head["attacks"])
    single = auditor.all_robust(["clean", *auditor.at(auditor.attack, white_box_only=False)])
    eot = next(lb for lb in head["attacks"] if lb.startswith("EOT-PGD"))
    assert head["accuracy"] <= accuracy(auditor.flags[eot])
    assert head["accuracy"] > accuracy(single)  # the single draws' worst case counts the noise as broken
    assert not head["trustworthy"]


class _NanGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return torch.full_like(grad, float("nan"))


def test_a_nan_input_gradient_its_warnings_and_invalid_examples_reach_the_record_and_the_page(plain, test_set,
                                                                                            tmp_path):
    """The identity forward with a NaN backward: AutoAttack's final check warns of NaN values (APGD-L2 returns NaN
    images) and the record keeps
    the warning with its measurement; PGD-L2 on it (the transfer check's, from itself as the surrogate) returns NaN
    images, counted per attack as invalid (not broken);
    NES (the gradient estimated from the outputs) stands in for BPDA, whose gradients are NaN too."""
    model = Wrapped(plain, _NanGradient.apply)
    auditor = _auditor(model, test_set, autoattack=AA, l2=L2, surrogate=model)
    record, paths = _page(auditor, tmp_path)
    assert any("NaN values" in w for w in record["attack_warnings"]["AutoAttack L2"])  # APGD-L2 normalises NaN
    transfer = record["invalid"]["transfer PGD-10 L2"]  # PGD-L2 normalises the NaN gradient: NaN images, all
    assert transfer["non_finite"] == transfer["invalid_examples"] == len(test_set[1])
    assert record["measurements"]["transfer PGD-10 L2"] == record["clean_accuracy"]  # an invalid one breaks nothing
    assert record["trustworthy"] is False
    assert any(lb.startswith("NES-APGD") for lb in record["best_known"][f"linf {EPS:.4g}"]["attacks"])
    page = paths["md"].read_text()
    assert f"| transfer PGD-10 L2 | {100 * record['clean_accuracy']:.1f}% | {len(test_set[1])} (non finite" in page
    assert "NaN values" in page


def test_non_finite_logits_are_a_finding_of_their_own(plain, test_set):
    """NaN logits on bright images (any pixel above 0.99): the white image and uniform noise among the audit's probes
    find them; a plain model passes."""
    def nan_when_bright(x):
        out = plain(x)
        return out + torch.where(x.flatten(1).amax(1, keepdim=True) > 0.99, float("nan"), 0.0)

    class Bright(nn.Module):
        def forward(self, x):
            return nan_when_bright(x)

    finite = _checks(_auditor(Bright(), test_set), "finite")["finite"]
    assert finite["verdict"] == "fail" and finite["numbers"]["nonfinite"] > 0 and finite["next"]
    assert _checks(_auditor(plain, test_set), "finite")["finite"]["verdict"] == "pass"
