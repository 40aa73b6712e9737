"""Human names of measurements, for figures and tables: one place, pure (no matplotlib, no file access).

Three kinds of names reach a reader:

- a target's columns (``nat``, ``pgd20``, ``apgd_ce``, ``pgd@16/255`` ...): :func:`column_label`;
- the columns of a run's training curves (``train_mu``, ``eval_clean``, ``learner_nt_pgd_from_at`` ...):
  :func:`curve_label`, with :func:`curve_unit` and :func:`curve_scale` (the curves files store accuracies as
  fractions in [0, 1]; figures draw them in %);
- a target's rows: :func:`row_label`.

What the catalog writes wins over the defaults here: a row's own ``label``, and a target's ``column_labels``
mapping (column -> label). A column whose name is not one of the catalog's lower-case measurement names
(``SA``, ``AA``, ``T-FAB``, ``AutoAttack``) is already a label someone wrote, and is kept as written.
"""

from __future__ import annotations

import re

from tradeoff.config.budgets import split_budget
from tradeoff.core.targets import Row, TargetSpec

# the catalog's measurement (column and attack) names, lower case, without a budget
MEASUREMENTS = {
    "clean": "Clean", "nat": "Natural", "natural": "Natural", "sa": "SA",
    "pgd": "PGD", "pgd_l2": "PGD-L2", "mim": "MIM", "cw": "CW", "fgsm": "FGSM",
    "apgd": "APGD", "apgd_ce": "APGD-CE", "apgd_dlr": "APGD-DLR", "apgd_t": "APGD-T", "apgd_l2": "APGD-L2",
    "t_apgd_dlr": "T-APGD-DLR", "t_apgd_l2": "T-APGD-L2",
    "fab": "FAB", "fab_t": "FAB-T", "t_fab": "T-FAB", "t_pgd_l2": "T-PGD-L2",
    "square": "Square", "aa": "AutoAttack", "nrob": "NROB",
    "train_minutes": "Training time (min)", "mean": "Mean",
}
_STEPS = re.compile(r"^(pgd|mim|cw|fgsm)(\d+)$")  # pgd20 -> PGD-20


def _measurement(name: str) -> str | None:
    """The human name of a lower-case measurement name (an L2 variant written ``<name>_l2``; CA-AT's
    attacks prefixed ``caat_``), or None for a name that is not one."""
    if name in MEASUREMENTS:
        return MEASUREMENTS[name]
    if name.startswith("caat_"):
        return _measurement(name[len("caat_"):])
    if name.endswith("_l2") and len(name) > 3:
        base = _measurement(name[:-3])
        return None if base is None else f"{base} (L2)"
    match = _STEPS.match(name)
    if match:
        return f"{MEASUREMENTS[match.group(1)]}-{match.group(2)}"
    return None


def budget_text(label: str) -> str:
    """A budget as the catalog writes it in a name: ``8/255`` or, in a job name, ``8_255`` -> ``8/255``."""
    return label.replace("_", "/") if re.fullmatch(r"\d+(\.\d+)?_\d+(\.\d+)?", label) else label


def column_label(target: TargetSpec | None, column: str) -> str:
    """A target's column (or an attack, with ``target`` None) as a reader names it: ``pgd20`` -> "PGD-20",
    ``apgd_ce`` -> "APGD-CE", ``nat`` -> "Natural", ``aa`` -> "AutoAttack", ``pgd@16/255`` -> "PGD, ε = 16/255".
    The target's ``column_labels`` win; a name that is no measurement name is already a label (kept)."""
    own = target.column_labels if target is not None else {}
    if column in own:
        return own[column]
    base, budget = split_budget(column)
    name = _measurement(base)
    if name is None:
        return column
    return f"{name}, ε = {budget_text(budget)}" if budget else name


def row_label(row: Row, reference_label: str | None = None) -> str:
    """A target row's label: its own ``label``, else the reference table's label of its key, else its key."""
    return row.label or reference_label or row.key


# ------------------------------------------------------------------------------------------ training curves

LEARNERS = {"nt": "NT learner", "at": "AT learner", "global": "global learner"}
CURVES = {  # tradeoff.training.train's columns and the per-step quantities methods report (train_<key>, averaged per epoch)
    "epoch": "epoch",
    "lr": "learning rate",
    "train_loss": "training loss",
    "train_acc": "training accuracy (%)",
    "eval_clean": "clean accuracy (%)",
    "eval_robust": "robust accuracy (%)",
    "seconds": "epoch time (s)",
    "images_per_s": "throughput (images/s)",
    "track_seconds": "learner tracking time (s)",
    # vanilla AT / CA-AT (tradeoff.methods.vanilla)
    "train_mu": "μ (gradient conflict)",
    "train_cos": "cos(g_c, g_a)",
    "train_norm_gc": "‖g_c‖ (clean gradient norm)",
    "train_norm_ga": "‖g_a‖ (adversarial gradient norm)",
    "train_clean_loss": "clean loss",
    "train_adv_loss": "adversarial loss",
    # Generalist (tradeoff.methods.generalist)
    "train_gamma": "γ (mixing weight of the AT learner)",
    "train_nt_acc": "NT learner, training accuracy (%)",
    "train_nt_loss": "NT learner, training loss",
    # FAT (tradeoff.methods.fat)
    "train_tau": "τ (FAT early-stopping threshold)",
    "train_pgd_steps": "PGD steps per example",
}
# fractions in [0, 1] in the curves files, drawn in %
_PERCENT = {"train_acc", "eval_clean", "eval_robust", "train_nt_acc"}
_SECONDS = {"seconds", "track_seconds"}
_LEARNER = re.compile(r"^learner_([a-z]+)_(?:clean|([a-z0-9_-]+?)_(self|from_([a-z]+)))$")


def _learner(name: str) -> str:
    return LEARNERS.get(name, f"{name.upper()} learner")


def curve_label(name: str) -> str:
    """A training-curve column as a reader names it, with its unit: ``train_mu`` -> "μ (gradient conflict)",
    ``eval_clean`` -> "clean accuracy (%)", ``learner_at_clean`` -> "AT learner, clean accuracy (%)",
    ``learner_nt_pgd_from_at`` -> "NT learner, PGD accuracy, attack made against the AT learner (%)"."""
    if name in CURVES:
        return CURVES[name]
    match = _LEARNER.match(name)
    if match:
        learner, kind, how, source = match.groups()
        if kind is None:
            return f"{_learner(learner)}, clean accuracy (%)"
        attack = _measurement(kind.replace("-", "_")) or kind.upper()
        against = "itself" if how == "self" else f"the {_learner(source)}"
        return f"{_learner(learner)}, {attack} accuracy, attack made against {against} (%)"
    if name.startswith("train_"):
        return f"training {name[len('train_'):].replace('_', ' ')}"
    return name.replace("_", " ")


def curve_unit(name: str) -> str:
    """"%" (an accuracy), "s" (a time), "images/s", or "" (a quantity without a unit)."""
    if name in _PERCENT or _LEARNER.match(name):
        return "%"
    if name in _SECONDS:
        return "s"
    if name == "images_per_s":
        return "images/s"
    return ""


def curve_scale(name: str) -> float:
    """The factor from a curves file's value to the drawn one: 100 for accuracies (stored as fractions)."""
    return 100.0 if curve_unit(name) == "%" else 1.0


def curve_axis_label(name: str) -> str:
    """The y-axis label of a panel of curve ``name``: "accuracy (%)", "time (s)", "images/s", or the name."""
    unit = curve_unit(name)
    if unit == "%":
        return "accuracy (%)"
    if unit == "s":
        return "time (s)"
    return unit or curve_label(name)


def curve_title(name: str) -> str:
    """The curve's label without its unit (a panel title; the axis says the unit)."""
    label = curve_label(name)
    return re.sub(r" \((%|s|images/s)\)$", "", label)


# ------------------------------------------------------------------------------------------ the papers' claims

# A claim of config/claims.yaml in a few words (the summary's verdict table, the forest plot's ticks), by its id; a
# claim not listed here is named by the first words of its quote.
CLAIMS = {
    "generalist-clean-over-robust": "more accurate clean than every robust method",
    "generalist-keeps-robustness": "AutoAttack robustness at TRADES' level",
    "generalist-apgd-over-tuned-trades": "beats TRADES tuned to its clean accuracy, APGD",
    "generalist-only-clean-and-aa": "only method high on both clean and AutoAttack",
    "generalist-wrn-over-trades": "WRN: beats TRADES under six attacks",
    "generalist-wrn-only-clean-and-aa": "WRN: only method high on clean and AutoAttack",
    "generalist-not-slower": "trains no slower than TRADES",
    "generalist-gamma-best": "γ = (1, 1, 1, 0) is the best mixing strategy",
    "generalist-gamma-late-decay": "a late-decaying γ is less accurate",
    "generalist-last-breakpoint": "a later last breakpoint, more robust",
    "generalist-scheduled-gamma": "a scheduled γ is more robust than a fixed one",
    "generalist-c-clean-peak": "clean accuracy peaks over the period c",
    "generalist-c-robust-trough": "robust accuracy has a trough over c",
    "generalist-wa-both": "weight averaging in both learners helps",
    "generalist-sgd-over-adam": "SGD beats Adam under attack",
    "generalist-adam-natural-sgd-adversarial": "Adam for the NT learner, SGD for the AT one",
    "generalist-mnist-svhn": "best on MNIST and SVHN",
    "generalist-cifar100": "a good trade-off on CIFAR-100",
    "zipper-ema": "removing EMA hurts",
    "zipper-tinyimagenet-nrob": "more robust to corruptions (Tiny ImageNet)",
    "zipper-tinyimagenet-maintains": "Tiny ImageNet: clean and robust maintained",
    "zipper-l2": "effective under the L2 threat model",
    "zipper-increasing-gamma": "an increasing γ is more robust",
    "zipper-wrn-over-trades": "WRN: beats TRADES under several attacks",
    "caat-conflict-grows": "gradient conflict grows with the budget",
    "caat-peft-fronts": "better fronts when fine-tuning adapters",
    "caat-front": "a better clean–robust front than vanilla AT",
    "caat-losses": "helps with TRADES and CLP losses too",
    "caat-cifar100": "better on CIFAR-100 too",
    "caat-larger-budgets": "more robust at larger budgets",
    "caat-table1-except-fab": "beats vanilla AT under every attack but FAB",
    "caat-square": "beats vanilla AT under Square",
    "caat-stronger-training-vanilla": "vanilla AT degrades with a larger training budget",
    "caat-stronger-training-caat": "CA-AT improves with a larger training budget",
}
_CLAIM_WORDS = 8


def claim_words(claim: dict) -> str:
    """A claim (an entry of config/claims.yaml) in a few words: :data:`CLAIMS`' text, else its quote's first
    words."""
    if claim.get("id") in CLAIMS:
        return CLAIMS[claim["id"]]
    words = str(claim.get("says", claim.get("id", ""))).split()
    return " ".join(words[:_CLAIM_WORDS]) + (" …" if len(words) > _CLAIM_WORDS else "")


def claim_title(claim: dict) -> str:
    """A claim with its paper's short name ("Generalist: more accurate clean than every robust method")."""
    return f"{str(claim.get('paper', '')).split(' (')[0]}: {claim_words(claim)}"
