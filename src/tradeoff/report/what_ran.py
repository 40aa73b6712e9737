"""What ran, said where a reader looks: a target's title, its columns' budgets and its twins at the scale that ran.

A target's title in the catalog names the paper's setting ("Table 1(a): CIFAR-10, ResNet-18, eps = 8/255"). At a
smaller scale that setting did not run, so the title says what did ("— demo scale ran: 8×8 digits, small CNN,
ε = 0.3"); a column names its budget as the paper writes it and, where the scale maps it, the budget that ran
("PGD-20, ε = 8/255 (here 0.3)"); and a target whose every cell is another target's at this scale (the same
training jobs under the same evaluations) says so in its title instead of passing for a second result. Pure: it
reads the resolved catalog only, never a results file.
"""

from __future__ import annotations

import re

from tradeoff.config import PSEUDO_COLUMNS, Catalog, parse_budget, split_budget
from tradeoff.core.spec import AttackSpec
from tradeoff.core.targets import Row, TargetSpec
from tradeoff.report.labels import budget_text, column_label

#: readers' names of the datasets and architectures that a scale maps to (the others are named by their id)
DATASET_NAMES = {"digits": "8×8 digits", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "svhn": "SVHN",
                 "mnist": "MNIST", "tinyimagenet": "Tiny-ImageNet", "cub200": "CUB-200",
                 "stanford-dogs": "Stanford Dogs"}
ARCH_NAMES = {"small_cnn": "small CNN", "vit_tiny": "tiny ViT", "vit_tiny_adapter": "tiny ViT with adapters",
              "resnet18": "ResNet-18", "resnet34": "ResNet-34", "wrn-28-10": "WRN-28-10", "wrn-32-10": "WRN-32-10",
              "wrn-34-10": "WRN-34-10", "swin_t_adapter": "Swin-T with adapters",
              "vit_b16_adapter": "ViT-B/16 with adapters"}


def _runs(catalog: Catalog, target: TargetSpec) -> list[str]:
    return [r for row in target.rows for r in catalog.row_runs(row.run)]


def _written_budget(catalog: Catalog, attack: str, run_id: str) -> str | None:
    """A budget as the paper's catalog writes it: the job's sweep label, the attack's eps, or the paper dataset's
    standard budget for its norm."""
    base, label = split_budget(attack)
    spec = catalog.attacks[base]
    if label is not None:
        return budget_text(label)
    if spec.eps is not None:
        return str(spec.eps)
    model = catalog.model_spec(run_id)
    dataset = model.paper_dataset or model.dataset
    budget = catalog.standard_budget(dataset, str(spec.norm))
    return None if budget is None else str(budget)


def budget_phrase(catalog: Catalog, attack: str, run_ids: list[str]) -> str | None:
    """"ε = 8/255", or "ε = 8/255 (here 0.3)" where this scale runs another budget, over a column's rows (distinct
    settings joined by " / "); None for a column without a budget (clean accuracy, corruptions, a time)."""
    base, label = split_budget(attack)
    if attack in PSEUDO_COLUMNS or base not in catalog.attacks or catalog.attacks[base].clean or \
            catalog.attacks[base].corruptions:
        return None
    if label is None and catalog.attacks[base].sweep:
        return None  # a whole budget sweep (a `lines` figure's x axis names its budgets)
    parts = []
    for run in dict.fromkeys(run_ids):
        written = _written_budget(catalog, attack, run)
        ran = float(catalog.attack_for(attack, run).eps)
        same = written is not None and abs(parse_budget(written, "eps") - ran) < 1e-9
        text = written if same else f"{written} (here {ran:.3g})" if written else f"{ran:.3g}"
        if text not in parts:
            parts.append(text)
    return "ε = " + " / ".join(parts) if parts else None


def column_title(catalog: Catalog, target: TargetSpec, key: str, attack: str) -> str:
    """A column's header: its measurement and its budget (see budget_phrase)."""
    label = column_label(target, key)
    if "ε =" in label:  # a sweep's column label names the budget already: replace it by the full phrase
        label = label.split(", ε =")[0]
    budget = budget_phrase(catalog, attack, _runs(catalog, target))
    return f"{label}, {budget}" if budget else label


def attack_phrase(catalog: Catalog, attack: str, run_ids: list[str]) -> str:
    """An attack of the catalog as a figure names it outside a column: "PGD-20, ε = 8/255 (here 0.3)"."""
    budget = budget_phrase(catalog, attack, run_ids) if attack in catalog.attacks else None
    return column_label(None, attack) + (f", {budget}" if budget else "")


def tracking_attack(catalog: Catalog, run_ids: list[str]) -> str | None:
    """The attack (as the catalog names it) that a Generalist run's learner tracking (its ``learner_*`` curves)
    runs, or None."""
    for run in run_ids:
        written = catalog.written_run(run) or {}
        attack = ((written.get("method") or {}).get("track_learners") or {}).get("attack")
        if isinstance(attack, str):
            return attack
    return None


def tracking_images(catalog: Catalog, run_ids: list[str]) -> str | None:
    """Which images a Generalist run's learner tracking (its ``learner_*`` curves) measures after every epoch, as a
    figure says it ("1,000 validation images, held out of training"), or None."""
    for run in run_ids:
        track = (catalog.runs[run].method.params.get("track_learners") if run in catalog.runs else None)
        if track:
            n, held = int(track["examples"]), catalog.runs[run].selection.validation
            if track.get("split", "validation") == "validation" and held:   # (training.train.tracking_split)
                return f"{min(n, held):,} validation images, held out of training"
            return f"{n:,} test images (the images the tables measure)"
    return None


def _names(values, names: dict) -> str:
    return ", ".join(names.get(v, v) for v in dict.fromkeys(values))


def ran_phrase(catalog: Catalog, name: str) -> str | None:
    """What ran at a smaller scale, for a title ("8×8 digits, small CNN, ε = 0.3"); None at the paper scale, where
    every run is the paper's setting."""
    target = catalog.targets[name]
    runs = [r for r in _runs(catalog, target) if not catalog.is_external(r)]
    own = target.analysis.params.get("dataset") if target.analysis else None
    if not runs and own:  # an analysis of its own dataset (CA-AT Figure 2): the dataset it reads at this scale
        ran = catalog.analysis_datasets(name)
        return None if ran == [own] else _names(ran, DATASET_NAMES) + " (at its own image size)"
    if not runs or all(catalog.runs[r].paper_dataset == catalog.runs[r].dataset
                       and catalog.runs[r].paper_arch == catalog.runs[r].arch for r in runs):
        return None
    text = (f"{_names((catalog.runs[r].dataset for r in runs), DATASET_NAMES)}, "
            f"{_names((catalog.runs[r].arch for r in runs), ARCH_NAMES)}")
    first = runs[0]
    budgets = {round(float(catalog.attack_for(job, first).eps), 6)
               for a in target.columns.values() if budget_phrase(catalog, a, [first])
               for job in catalog.column_jobs(a)}
    if len(budgets) == 1:
        text += f", ε = {next(iter(budgets)):.3g}"
    return text


def title(catalog: Catalog, name: str) -> str:
    """A target's title: the catalog's (the paper's setting), what ran at a smaller scale, and the target it
    repeats at this scale, if any."""
    target = catalog.targets[name]
    out = target.title if target.title is not None else name
    ran = ran_phrase(catalog, name)
    if ran:
        out += f" — {catalog.scale} scale ran: {ran}"
    if generated(catalog):
        out += (f" — {catalog.scale} scale: generated data in the paper's formats, a few steps per run; "
                "its numbers carry no meaning")
    same = twin(catalog, name)
    if same:
        out += f" (= {same} at this scale)"
    return out


def twin(catalog: Catalog, name: str) -> str | None:
    """The first target of the catalog whose every cell this one repeats at this scale (Catalog.twin)."""
    return catalog.twin(name)


def twin_note(catalog: Catalog, name: str) -> str | None:
    same = twin(catalog, name)
    if same is None:
        return None
    own = catalog.targets[name].reference
    papers = ("; only the paper's numbers beside them are its own"
              if own and own != catalog.targets[same].reference else "")
    return (f"at the {catalog.scale} scale every row of this target is the same training job as in {same}, under the "
            f"same evaluations: our numbers are {same}'s, not a second measurement{papers}")


def shared_job_notes(catalog: Catalog, name: str, labels: dict[str, str] | None = None) -> list[str]:
    """One note naming the rows whose training job at this scale is a run of another paper setting (dataset or
    architecture): a row labelled MNIST whose model is the CIFAR-10 run's is said to be so; none for a target that
    repeats another (its twin note says more)."""
    if twin(catalog, name) is not None:
        return []

    def setting(run: str) -> tuple:
        return catalog.runs[run].paper_dataset, catalog.runs[run].paper_arch

    shared = []
    for row in catalog.targets[name].rows:
        run = row.run
        if catalog.is_external(run):
            continue
        job = catalog.train_id[run]
        if job != run and setting(job) != setting(run):
            shared.append(f"{(labels or {}).get(row.key) or row.label or row.key} (`{job}`)")
    if not shared:
        return []
    return [f"at this scale these rows are also the training jobs of other paper datasets or architectures (mapped "
            f"onto the same one): {', '.join(dict.fromkeys(shared))}"]


# ------------------------------------------------------------------------------- the settings a row studies

#: readers' names of the settings a target's rows study, by (method, setting); a setting not named is named by its
#: key (``c``, ``lr``). Generalist's run schedule is its AT learner's (tradeoff.methods.generalist).
SETTING_NAMES = {("generalist", "nt_lr"): "NT", ("generalist", "lr"): "AT", (None, "attack.eps"): "δ"}


def generated(catalog: Catalog) -> bool:
    """True where this scale's data are generated files (the rehearsal scale): its numbers measure nothing about the
    methods, so its tables show no bold, no dagger and no verdict."""
    return catalog.generated_data


def _numbers(spec: dict, catalog: Catalog | None = None) -> dict[str, float]:
    """The scalar settings of a run that a row may study: its learning rate (the schedule's peak), its method's
    numeric parameters and its training attack's budget, by key (``lr``, ``nt_lr``, ``c``, ``attack.eps`` ...).
    ``catalog``: given for a run as written (its attack a name, its budget the attack's or the dataset's standard
    one); None for a resolved run."""
    out = {}
    lr = spec.get("lr")
    if isinstance(lr, dict) and lr.get("values"):
        out["lr"] = float(max(lr["values"]))
    for key, value in (spec.get("method") or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)
        elif key == "attack" and isinstance(value, dict) and AttackSpec.from_dict(value).eps is not None:
            out["attack.eps"] = float(AttackSpec.from_dict(value).eps)
        elif key == "attack" and isinstance(value, str) and catalog is not None:
            attack = AttackSpec.from_dict({"type": None, **catalog.written_attack(value)})  # unknown: the standard L-inf budget
            eps = attack.eps
            if eps is None:
                eps = catalog.standard_budget(spec.get("dataset"), str(attack.norm))
            if eps is not None and not attack.sweep:
                out["attack.eps"] = parse_budget(eps, f"{key}.eps")
    return out


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def studied_settings(catalog: Catalog, name: str) -> dict[str, dict[str, tuple[float, float]]]:
    """Per row key of a target: {setting: (as the catalog writes it, as this scale runs it)} for each setting that
    its rows study (written differently among them); empty when the rows study no such setting."""
    rows = [row for row in catalog.targets[name].rows if not catalog.is_external(row.run)]
    written = {row.key: catalog.written_run(row.run) for row in rows}
    if len(rows) < 2 or any(w is None for w in written.values()):
        return {}
    numbers = {key: _numbers(w, catalog) for key, w in written.items()}
    keys = [k for k in dict.fromkeys(k for n in numbers.values() for k in n)
            if all(k in n for n in numbers.values()) and len({n[k] for n in numbers.values()}) > 1]
    keys.sort(key=lambda k: k == "lr")  # the method's own settings first, the run's schedule last
    out = {}
    for row in rows:
        ran = _numbers(catalog.runs[row.run].as_dict())
        out[row.key] = {k: (numbers[row.key][k], ran[k]) for k in keys if k in ran}
    return out


def _differs(a: float, b: float) -> bool:
    return abs(a - b) > 1e-9 * max(abs(a), abs(b), 1.0)


def setting_name(catalog: Catalog, run: str, key: str) -> str:
    method = catalog.runs[run].method.name if not catalog.is_external(run) else None
    return SETTING_NAMES.get((method, key)) or SETTING_NAMES.get((None, key), key)


def here_clause(catalog: Catalog, name: str, row: Row, label: str | None = None) -> str:
    """" — here NT 0.1, AT 0.1" for a row whose studied settings (studied_settings) this scale runs otherwise than
    its label (the paper's setting) says; where the label does not give the paper's values (``label``: "Baseline
    (SGD)"), both: " — lr 0.01, here 0.1". "" when they ran as written."""
    settings = studied_settings(catalog, name).get(row.key) or {}
    if not any(_differs(w, r) for w, r in settings.values()):
        return ""
    names = {k: setting_name(catalog, row.run, k) for k in settings}
    here = ", ".join(f"{names[k]} {_fmt(r)}" for k, (_, r) in settings.items())
    text = label if label is not None else (row.label or "")
    written = {k: _written_value(k, w) for k, (w, _) in settings.items()}
    if all(re.search(rf"(?<![\d./]){re.escape(v)}(?![\d./])", text) for v in written.values()):
        return f" — here {here}"
    return " — " + ", ".join(f"{names[k]} {v}" for k, v in written.items()) + f"; here {here}"


def _written_value(key: str, value: float) -> str:
    """A setting as the paper writes it: a budget in 255ths where it is one (8/255), else its number."""
    if key.endswith("eps") and value > 0 and abs(value * 255 - round(value * 255)) < 1e-6:
        return f"{round(value * 255)}/255"
    return _fmt(value)


def ratio_note(catalog: Catalog, name: str, labels: dict[str, str] | None = None) -> str | None:
    """A note for a target whose rows study two learning rates (Table 5: the NT learner's against the AT
    learner's) where this scale does not keep their ratio; None where it does, or where no two are studied."""
    studied = studied_settings(catalog, name)
    rates = [k for k in next(iter(studied.values()), {}) if k == "lr" or k.endswith("_lr")]
    if len(rates) < 2:
        return None
    a, b = rates[:2]
    changed = []
    for row in catalog.targets[name].rows:
        settings = studied.get(row.key)
        if not settings or a not in settings or b not in settings or not settings[b][0] or not settings[b][1]:
            continue
        paper, here = settings[a][0] / settings[b][0], settings[a][1] / settings[b][1]
        if _differs(paper, here):
            label = ((labels or {}).get(row.key) or row.label or row.key).split(" — here ")[0]
            changed.append(f"{label}: "
                           f"{_ratio(paper)} → {_ratio(here)}")
    if not changed:
        return None
    run = catalog.targets[name].rows[0].run
    return (f"the rows study the ratio of the {setting_name(catalog, run, a)} to the {setting_name(catalog, run, b)} "
            f"learning rate, which the {catalog.scale} scale does not keep: " + "; ".join(changed))


def _ratio(x: float) -> str:
    return f"{_fmt(x)}:1" if x >= 1 else f"1:{_fmt(1 / x)}"
