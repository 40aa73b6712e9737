"""Every paper-scale run of the catalog against the hyperparameters the papers state (CATALOG.md, the Generalist
appendix A.1-A.5, Zipper A.4-A.5, CA-AT Sec. 5.1), or, where they are silent, the authors' code (REFERENCE_NOTES.md),
or a line of docs/differences.md that names the difference. The expectations are written out here per run family,
not read from config/config.yaml, so a wrong value there fails; and every line of docs/differences.md names a test
that exists."""

from __future__ import annotations

import re

import pytest

from tradeoff import config as cfg

ROOT = cfg.ROOT
DOCS = ROOT / "docs" / "differences.md"
TRAIN_SIZES = {"cifar10": 50000, "cifar100": 50000, "mnist": 60000, "svhn": 73257, "tinyimagenet": 100000}

EPS = 8 / 255
PGD10 = {"type": "pgd", "norm": "linf", "steps": 10, "eps": EPS, "step_size": 2 / 255, "random_start": True}
PGD10_L2 = {"type": "pgd", "norm": "l2", "steps": 10, "eps": 128 / 255, "step_size": 15 / 255, "random_start": True}
PGD20 = {"type": "pgd", "norm": "linf", "steps": 20, "eps": EPS, "step_size": 2 / 255, "random_start": True}
SGD = {"name": "sgd", "momentum": 0.9, "nesterov": False}
NT_OPT = {"name": "sgd", "momentum": 0.9, "weight_decay": 5e-4, "nesterov": False}
A1_LR = [0.01, 0.01, 0.001, 0.0001]  # A.1: 0.01 till epoch 40, then linearly /10 at 60 and at 120


def lr_shape(first):
    return {"epochs": [0, 40, 60, 120], "values": [first, first, first / 10, first / 100]}


# (pattern on the run id, where the value comes from, expectations {dotted path: value}). Every rule whose pattern
# matches applies, later ones over earlier ones. The source is "paper", "code" (the paper is silent; the authors'
# code) or the `what` of a line of docs/differences.md that names the difference.
RULES: list[tuple[str, str, dict]] = [
    # ---- Generalist and Zipper (Appendix A.1; Zipper A.4: "the same as for CIFAR datasets")
    (r"^(cifar10|cifar100|mnist|svhn|tinyimagenet)-(resnet18|wrn32)-(?!vanilla|caat)", "paper", {
        "epochs": 120, "batch_size": 128, "optimizer": {**SGD, "weight_decay": 3.5e-3}, "lr": lr_shape(0.01),
        "lr_update": "epoch", "augment": {"crop_padding": 4, "flip": True}, "bn_running_stats": True,
        "selection.mode": "best", "selection.min_clean": 0.0, "selection.attack": PGD20,
    }),
    (r"^(cifar10|cifar100|mnist|svhn|tinyimagenet)-(resnet18|wrn32)-(?!vanilla|caat)", "Selection set",
     {"selection.examples": 10000}),
    # every run chooses its epoch on a validation split held out of its training data (paper and code: the test set)
    (r"^(cifar10|cifar100|mnist|svhn)-", "Selection split", {"selection.split": "validation",
                                                            "selection.validation": 1000}),
    (r"^tinyimagenet-", "Selection split", {"selection.split": "validation", "selection.validation": 2000}),
    (r"^(cub200|stanford-dogs)-", "Selection split", {"selection.split": "validation", "selection.validation": 0}),
    (r"-wrn32-", "WRN-32-10", {}),
    (r"-wrn32-", "paper", {"arch": "wrn-32-10", "optimizer.weight_decay": 7e-4, "lr": lr_shape(0.1)}),
    (r"-resnet18-", "paper", {"arch": "resnet18"}),
    # the baselines of Table 1 take A.1's setup too
    (r"-(nt|at-beta1|at-beta0_5|trades-lambda\d|fat|iat|rst)(-seeds|-l2|-adam)?$", "Baselines' training setup", {}),
    (r"^cifar10-resnet18-generalist$", "Learning-rate breakpoints", {"lr.epochs": [0, 40, 60, 120]}),
    # methods
    (r"-nt$", "paper", {"method.name": "nt"}),
    (r"-at-beta1(-adam|-l2)?$", "paper", {"method.name": "pgd_at", "method.beta": 1.0, "method.attack": PGD10}),
    (r"-at-beta0_5$", "paper", {"method.name": "pgd_at", "method.beta": 0.5, "method.attack": PGD10}),
    (r"-(at-beta1|at-beta0_5|iat)(-adam|-l2)?$", "Attack mode in training", {"method.attack_mode": "train"}),
    (r"-trades-lambda6$", "paper", {"method.name": "trades", "method.lam": 6.0}),
    (r"-trades-lambda1(-seeds|-l2)?$", "paper", {"method.name": "trades", "method.lam": 1.0}),
    (r"-(resnet18|wrn32)-trades(-|$)", "TRADES' inner maximiser", {"method.attack": PGD10, "method.inner": "kl",
                                              "method.attack_mode": "eval"}),
    (r"-fat$", "paper", {"method.name": "fat", "method.tau_values": [0, 1, 2], "method.tau_epochs": [50, 90],
                         "method.omega": 0.001, "method.attack": PGD10}),
    (r"-fat$", "FAT's start", {"method.random_start": "normal", "method.step_noise": False}),
    (r"-iat$", "paper", {"method.name": "iat", "method.alpha": 1.0, "method.attack": PGD10}),
    (r"-rst$", "RST", {"method.name": "rst", "method.beta": 0.5, "method.attack_mode": "eval",
                       "method.attack": {**PGD10, "start": "normal", "clip_start": False}, "method.unlabeled": None}),
    (r"-generalist", "paper", {
        "method.name": "generalist", "method.attack": PGD10,
        "method.gamma": {"epochs": [0, 40, 80, 120], "values": [1, 1, 1, 0]},
        "method.t_prime": 75, "method.c": 5, "method.ema": True, "method.ema_decay": 0.999,
        "method.nt_optimizer": NT_OPT, "method.nt_lr": 0.1, "method.parallel": False,
    }),
    (r"-generalist", "Weight averaging in the base learners", {"method.nt_wa": True, "method.at_wa": True}),
    (r"-generalist", "code", {"method.attack_mode": "eval"}),
    (r"-generalist", "Generalist's communication", {"method.communication": "epoch"}),
    (r"-generalist", "Generalist's global EMA", {"method.ema_warmup": False}),
    (r"-generalist", "Averaged BatchNorm buffers", {"method.average_buffers": False}),
    (r"-generalist", "NT learner's learning rate", {"method.nt_lr_schedule": "scaled"}),
    # Figure 3: c = 1..15; gamma strategies (and Zipper Table 9's)
    (r"-generalist-c(\d+)$", "paper", {"method.c": lambda m: int(m.group(1))}),
    (r"-generalist-gamma-1_1_0_8_0_2$", "paper", {"method.gamma.values": [1, 1, 0.8, 0.2]}),
    (r"-generalist-gamma-0_5$", "paper", {"method.gamma.values": [0.5, 0.5, 0.5, 0.5]}),
    (r"-generalist-gamma-1_1_1_0_5$", "paper", {"method.gamma.values": [1, 1, 1, 0.5]}),
    (r"-generalist-gamma-0_25_0_5_0_75_1$", "paper", {"method.gamma.values": [0.25, 0.5, 0.75, 1]}),
    (r"-generalist-gamma-0_75_0_75_0_75_1$", "paper", {"method.gamma.values": [0.75, 0.75, 0.75, 1]}),
    # Table 4: serial and parallel; Zipper Table 8: without EMA
    (r"-generalist-parallel$", "paper", {"method.parallel": True}),
    (r"-generalist-no-ema$", "paper", {"method.ema": False}),
    # Table 5: (lr_NT, lr_AT)
    (r"-generalist-lr-nt(0_1|0_01)-at(0_1|0_01|0_001)$", "Table 5 schedules", {
        "method.nt_lr": lambda m: float(m.group(1).replace("_", ".")),
        "lr": lambda m: lr_shape(float(m.group(2).replace("_", "."))),
    }),
    # Figure 4(a): weight averaging in one learner; Figure 4(b): Adam (initial lr 1e-4) in either learner
    (r"-generalist-wa-nt-only$", "paper", {"method.nt_wa": True, "method.at_wa": False}),
    (r"-generalist-wa-at-only$", "paper", {"method.nt_wa": False, "method.at_wa": True}),
    (r"-generalist-(adam|sgd)-adam$|-at-beta1-adam$", "paper", {"optimizer": {"name": "adam"}, "lr": lr_shape(1e-4)}),
    (r"-generalist-(adam|sgd)-adam$|-at-beta1-adam$", "Figure 4(b) Adam", {"optimizer.weight_decay": 3.5e-3}),
    (r"-generalist-adam-(adam|sgd)$", "paper", {"method.nt_optimizer": {"name": "adam"},
                                                            "method.nt_lr": 1e-4}),
    (r"-generalist-adam-(adam|sgd)$", "Figure 4(b) Adam", {"method.nt_optimizer.weight_decay": 5e-4}),
    # Zipper Table 5: trained and attacked in L2 (128/255, step 15/255)
    (r"-l2$", "paper", {"method.attack": PGD10_L2}),
    (r"-l2$", "Zipper Table 5's selection", {"selection.attack": {**PGD20, "norm": "l2", "eps": 128 / 255,
                                                                  "step_size": 15 / 255}}),
    # Table 2: MNIST (eps 0.3) and SVHN
    (r"^mnist-", "Table 2 (MNIST, SVHN)", {
        "augment": {"crop_padding": 0, "flip": False},
        "method.attack": {**PGD10, "eps": 0.3, "step_size": 0.075},
        "selection.attack": {**PGD20, "eps": 0.3, "step_size": 0.075},
    }),
    (r"^svhn-", "Table 2 (MNIST, SVHN)", {"augment": {"crop_padding": 4, "flip": False}}),
    (r"^(mnist|svhn)-resnet18-trades$", "paper", {"method.name": "trades"}),
    (r"^(mnist|svhn)-resnet18-trades$", "Table 2 (MNIST, SVHN)", {"method.lam": 6.0}),
    (r"-trades-lambda1-seeds$", "Table 4", {"method.lam": 1.0}),
    # Table 3: CIFAR-100, 200 epochs
    (r"^cifar100-resnet18-(?!vanilla|caat)", "Generalist on CIFAR-100 (Table 3)", {
        "epochs": 200, "lr.epochs": [0, 66.667, 100, 200]}),
    (r"^cifar100-resnet18-fat$", "Generalist on CIFAR-100 (Table 3)", {"method.tau_epochs": [83.333, 150]}),
    (r"^cifar100-resnet18-generalist$", "Generalist on CIFAR-100 (Table 3)", {
        "method.gamma.epochs": [0, 66.667, 133.333, 200], "method.t_prime": 125, "method.c": 5}),

    # ---- CA-AT from scratch (Sec. 5.1; batch, weight decay and Nesterov from the authors' script)
    (r"^[^_]*-(vanilla|caat)-", "paper", {
        "epochs": 200, "optimizer.name": "sgd", "optimizer.momentum": 0.9, "method.attack": PGD10,
        "augment": {"crop_padding": 4, "flip": True},
    }),
    (r"^[^_]*-(vanilla|caat)-", "code", {
        "batch_size": 1024, "optimizer.weight_decay": 5e-4, "optimizer.nesterov": True,
        "selection.mode": "best_robust", "selection.every": 25, "selection.attack": PGD20,
        "selection.examples": 10000, "method.attack_mode": "eval",
    }),
    (r"^[^_]*-(vanilla|caat)-", "One-cycle schedule", {
        "lr": {"epochs": [0, 1, 5, 200], "values": [0.016, 0.016, 0.4, 0.0]}, "lr_update": "epoch",
    }),
    (r"^[^_]*-(vanilla|caat)-", "BatchNorm running statistics", {"bn_running_stats": "blocks"}),
    (r"^(cifar10|cifar100)-(resnet34|wrn28)-|^cifar100-resnet18-(vanilla|caat)", "From-scratch runs", {}),
    (r"-resnet34-", "paper", {"arch": "resnet34"}),
    (r"-wrn28-", "paper", {"arch": "wrn-28-10"}),
    (r"-vanilla-lambda0$", "paper", {"method.name": "vanilla", "method.lam": 0.0}),
    (r"-vanilla-(ce|trades|clp)-lambda(0_25|0_5|0_75|1)(-|$)", "paper", {
        "method.name": "vanilla", "method.adv_loss": lambda m: m.group(1),
        "method.lam": lambda m: float(m.group(2).replace("_", ".")),
    }),
    (r"-caat-gamma1$", "paper", {"method.name": "caat", "method.gamma": 1.0, "method.per_tensor": False}),
    (r"-caat-(ce|trades|clp)-gamma(0_7|0_75|0_8|0_85|0_9)(-|$)", "paper", {
        "method.name": "caat", "method.adv_loss": lambda m: m.group(1), "method.per_tensor": False,
        "method.gamma": lambda m: float(m.group(2).replace("_", ".")),
    }),
    # Figure 3(b) and Table 2's inner maximisers; Figure 8's training budget (the caption's 12/255)
    (r"-train_apgd$", "From-scratch runs", {"method.attack": {"type": "apgd-ce", "norm": "linf", "steps": 10,
                                                               "eps": EPS}}),
    (r"-train_apgd_dlr$", "From-scratch runs", {"method.attack": {"type": "apgd-dlr", "norm": "linf", "steps": 10,
                                                                   "eps": EPS}}),
    (r"-train_t_apgd_dlr$", "From-scratch runs", {"method.attack": {"type": "apgd-t", "norm": "linf", "steps": 10,
                                                                     "target_classes": 9, "eps": EPS}}),
    (r"-train_pgd_dlr$", "paper", {"method.attack": {**PGD10, "type": "pgd-dlr"}}),
    (r"-train_eps12$", "CA-AT Figure 8's setting", {"arch": "resnet18", "method.attack": {**PGD10, "eps": 12 / 255}}),

    # ---- CA-AT fine-tuning with adapters (Figures 4, 5)
    (r"_adapter-", "Fine-tuning with adapters (Figures 4, 5)", {
        "epochs": 20, "batch_size": 128, "optimizer": {"name": "sgd", "momentum": 0.9, "weight_decay": 5e-4,
                                                       "nesterov": True},
        "lr": {"epochs": [0, 1, 20], "values": [0.002, 0.05, 0.0]}, "lr_update": "step",
        "selection.mode": "last", "method.attack": PGD10, "method.attack_mode": "eval",
    }),
    (r"^cub200-", "paper", {"dataset": "cub200"}),
    (r"-swin_t_adapter-", "paper", {"arch": "swin_t_adapter"}),
    (r"-vit_b16_adapter-", "paper", {"arch": "vit_b16_adapter"}),
]


def _get(spec: dict, path: str):
    value = spec
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            raise KeyError(path)
        value = value[key]
    return value


def _expect(expected: dict, path: str, value) -> None:
    """Set an expectation, replacing every earlier one at or under ``path``; a dict is kept as its leaves, so a later
    rule may change one of them (``optimizer.weight_decay``) or all (``method.attack``)."""
    for key in [k for k in expected if k == path or k.startswith(path + ".")]:
        del expected[key]
    if isinstance(value, dict):
        for key, inner in value.items():
            _expect(expected, f"{path}.{key}", inner)
    else:
        expected[path] = value


def _matches(got, want) -> bool:
    """want is a subset of got (dicts), or equal up to float rounding."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and _matches(got[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(_matches(g, w) for g, w in zip(got, want))
    if isinstance(want, float) or isinstance(got, float):
        return isinstance(got, (int, float)) and not isinstance(got, bool) and got == pytest.approx(want, rel=1e-6)
    return got == want and type(got) is type(want)


def _docs_rows() -> list[list[str]]:
    """The cells of every table line of docs/differences.md but the headers (an escaped \\| is no separator)."""
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            for line in DOCS.read_text().splitlines() if line.startswith("| ") and not line.startswith("| what")]


def _docs_whats() -> set[str]:
    return {cells[0] for cells in _docs_rows()}


@pytest.fixture(scope="module")
def paper():
    return cfg.load_catalog([ROOT / "config" / "config.yaml"], write_cache=False)


def test_every_paper_scale_run_resolves_to_the_papers_hyperparameters(paper):
    whats = _docs_whats()
    used_sources = set()
    for rid, spec in paper.runs.items():
        base = re.sub(r"-seed\d+$", "", rid)
        expected: dict = {}
        for pattern, source, values in RULES:
            match = re.search(pattern, base)
            if not match:
                continue
            used_sources.add(source)
            for path, value in values.items():
                _expect(expected, path, value(match) if callable(value) else value)
        assert "epochs" in expected and "method.name" in expected, f"{rid}: no family of rules covers it"
        for path, want in expected.items():
            try:
                got = _get(spec.as_dict(), path)  # a dotted path into the settings' JSON form
            except KeyError:
                pytest.fail(f"{rid}: no setting {path} (expected {want!r})")
            assert _matches(got, want), f"{rid}: {path} is {got!r}, expected {want!r}"
        if spec.method.name == "generalist":
            # Algorithm 1's alpha' = 0.999 per iteration: the EMA window of 1000 iterations, in epochs of the images
            # the run trains on (its dataset's training split less the validation split)
            iterations = -(-spec.trained_images(TRAIN_SIZES[spec.dataset]) // spec.batch_size)
            assert spec.method.get("ema_horizon") * iterations == pytest.approx(1000, abs=1), rid
    named = used_sources - {"paper", "code"}
    assert named <= whats, f"differences used here but not in docs/differences.md: {sorted(named - whats)}"


def test_smoke_scale_caps_attack_steps():
    smoke = cfg.load_catalog([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"], write_cache=False)
    run = "cifar10-resnet18-nt"
    assert smoke.attack_for("pgd100", run).params["steps"] == 3
    aa, square = smoke.attack_for("aa", run), smoke.attack_for("square", run)
    assert (aa.params["steps"], aa.params["queries"], square.params["queries"]) == (3, 3, 3)


def test_differences_name_real_tests():
    """Every line of docs/differences.md has the six columns and names a test function that exists."""
    rows = _docs_rows()
    assert len(rows) > 30
    for cells in rows:
        line = " | ".join(cells)
        assert len(cells) == 6 and all(cells), line
        match = re.fullmatch(r"`([a-z_]+\.py)::(test_[a-z0-9_]+)`", cells[5])
        assert match, f"the test column must name tests/<file>::<test>: {line}"
        source = (ROOT / "tests" / match.group(1)).read_text()
        assert re.search(rf"^def {match.group(2)}\(", source, re.M), f"no test {cells[5]}"


def test_readme_differences_are_lines_of_the_docs_with_real_tests():
    """README's table of paper-versus-code differences: every line is a line of docs/differences.md (its `what`),
    names an option for the code's behaviour, and names the same test, which exists."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Differences from the papers"):]
    section = section[:section.index("\n## ", 4)]
    rows = [[c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            for line in section.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    assert len(rows) >= 8
    docs = {cells[0]: cells for cells in _docs_rows()}
    for what, paper, code, test in rows:
        assert what in docs, f"README difference {what!r} is not a line of docs/differences.md"
        assert test == docs[what][5], f"README names {test} for {what!r}, docs/differences.md {docs[what][5]}"
        assert paper and "`" in code, f"{what!r}: the code's behaviour must be a named option"
