"""The convergence group's checks (is each reported column's attack strong enough), one registered function each:
the audit's attack against APGD-CE for more iterations (both budgets), the restart curve, other losses (CW, DLR),
multi-targeted PGD, silent success (best against last iterate), and every reported column against the best known
robust accuracy at its budget (``columns``: one finding per column, ``column <name>``; docs/audit.md)."""

from __future__ import annotations

import torch

from tradeoff.attacks import from_spec
from tradeoff.attacks.base import add_counts, judge
from tradeoff.attacks.loop import batch_seed
from tradeoff.audit.auditor import Auditor, apgd, steps_of
from tradeoff.audit.registry import check
from tradeoff.audit.verdicts import accuracy, both, check_both_norms, compare, finding, pct, worst
from tradeoff.core.spec import AttackSpec
from tradeoff.storage.layout import bits


@check_both_norms("steps", "L2: the attack against APGD-L2", group="convergence", needs_gradients=True)
def _steps_check(audit: Auditor, name: str, spec: dict) -> dict:
    """The attack as configured against APGD-CE (a step size that decays, so more iterations do not cycle) at
    each multiple of its steps."""
    s, k, norm = audit.settings, steps_of(spec), spec.norm
    tag = "" if norm == audit.attack.norm and spec is audit.attack else f" {norm.upper()}"
    base_label = f"PGD-{k}{tag}"
    base = audit.base() if spec is audit.attack else audit.measure(base_label, spec)
    curve = [(k * m, accuracy(audit.measure(f"APGD-CE-{k * m}{tag}", apgd(spec, k * m))))
             for m in sorted(s.step_multipliers)]
    most = audit.flags[f"APGD-CE-{k * max(s.step_multipliers)}{tag}"]
    fewest = audit.flags[f"APGD-CE-{k * min(s.step_multipliers)}{tag}"]
    verdict, stats = compare(base, most, s.tolerance, s.significance)
    more, more_stats = compare(fewest, most, s.tolerance, s.significance)
    verdict = worst([verdict, "warn" if more != "pass" else "pass"])
    return finding(name, f"PGD-{k}{tag} against APGD-CE for more iterations",
                   f"APGD-CE (the official code: its step halves when the loss stalls, so it does not cycle as "
                   f"sign-PGD at a fixed step does) at {max(s.step_multipliers)}x the steps may not lower robust "
                   f"accuracy by more than {pct(s.tolerance)} below PGD-{k} (significantly: fail; not: warn); "
                   f"APGD at {max(s.step_multipliers)}x its fewest steps still falling: warn",
                   "Carlini et al. 2019, Sec. 5.2 (iterative attacks must converge); Croce & Hein 2020 (APGD)",
                   verdict, f"PGD-{k} {pct(accuracy(base))}; " + ", ".join(
                       f"APGD-CE-{steps} {pct(a)}" for steps, a in curve),
                   f"PGD-{k} has not converged: report APGD-CE (or AutoAttack) for this column, or run PGD with "
                   f"a decaying step for {k * max(s.step_multipliers)}+ steps",
                   pgd=accuracy(base), curve=curve, apgd_gap=more_stats["gap"], **stats)


@check("restarts", group="convergence", needs_gradients=True)
def restarts(audit: Auditor) -> dict:
    """The restart curve: PGD-k from fresh random starts, one after another (each its own seed), until a restart
    breaks no example twice in a row (it has flattened) or ``restarts`` are run."""
    s = audit.settings
    k = audit.steps
    one = audit.base()
    current, curve, added = one, [(1, accuracy(one))], []
    for r in range(2, max(s.restarts, 1) + 1):
        flags = audit.measure(f"PGD-{k} restart {r}", audit.attack.replace(random_start=True),
                             seed=audit.seed + 7919 * (r - 1))
        new = both(current, flags)
        added.append(current.count("1") - new.count("1"))
        current = new
        curve.append((r, accuracy(current)))
        if len(added) >= 2 and added[-1] == 0 and added[-2] == 0:
            break
    audit.flags[f"PGD-{k} x{len(curve)} restarts"] = current
    audit.specs[f"PGD-{k} x{len(curve)} restarts"] = audit.attack.replace(restarts=len(curve))
    flattened = len(added) >= 2 and added[-1] == 0 and added[-2] == 0
    verdict, stats = compare(one, current, s.tolerance, s.significance)
    still = bool(added) and added[-1] > s.tolerance / 4 * len(audit.y)
    if verdict == "pass" and still:
        verdict = "warn"
    return finding("restarts", "The restart curve",
                   f"PGD-{k} with up to {s.restarts} random restarts (run until two restarts in a row break no "
                   f"example) may not lower robust accuracy by more than {pct(s.tolerance)} below one "
                   f"(significantly: fail); a curve still falling by more than {pct(s.tolerance / 4)} at its last "
                   "restart: warn",
                   "Carlini et al. 2019, Sec. 5.2; Croce & Hein 2020 (restarts)", verdict,
                   ", ".join(f"{r} {pct(a)}" for r, a in curve) + (" (flat)" if flattened else " (still falling)"
                                                                     if still else ""),
                   f"one PGD-{k} run does not find the worst case: report it with restarts until the curve is flat "
                   "(or APGD / AutoAttack)", curve=curve, flattened=flattened, added=added, **stats)


@check_both_norms("losses", "L2: the loss", group="convergence", finds_only=True)
def _losses_check(audit: Auditor, name: str, spec: AttackSpec) -> dict:
    s, tag, k = audit.settings, audit.tag(spec), steps_of(spec)
    base = audit.base_of(spec)
    results = {"ce": accuracy(base)}
    classes = audit.model_classes()
    for loss in ("cw", "dlr"):
        if loss == "dlr" and classes < 3:
            continue
        results[loss] = accuracy(audit.measure(f"PGD-{k} {loss.upper()}{tag}", spec.replace(loss=loss)))
    loss = min((key for key in results if key != "ce"), key=results.get, default="ce")
    verdict, stats = (compare(base, audit.flags[f"PGD-{k} {loss.upper()}{tag}"], s.tolerance, s.significance)
                      if loss != "ce" else ("pass", {}))
    return finding(name, f"The attack's loss against the margin (CW) and DLR losses{tag}",
                   f"PGD on the CW margin loss or the DLR loss may not lower robust accuracy by more than "
                   f"{pct(s.tolerance)} below PGD on the cross-entropy (a saturated CE, e.g. logits scaled by a "
                   "large factor, has vanishing gradients where the margin and DLR losses still work)",
                   "Carlini et al. 2019, Sec. 4.4 and 5.2; Croce & Hein 2020 (DLR)", verdict,
                   ", ".join(f"{key.upper()} {pct(v)}" for key, v in results.items()),
                   f"the CE is saturated or weak: report the {loss.upper()} loss's PGD (or APGD-DLR, AutoAttack)",
                   accuracies=results, strongest=loss, **stats)


@check_both_norms("targeted", "L2: multi-targeted PGD", group="convergence", finds_only=True)
def _targeted_check(audit: Auditor, name: str, spec: AttackSpec) -> dict:
    """The multi-targeted attack: PGD on the targeted margin towards each of the classes ranked next."""
    s, classes, tag, k = audit.settings, audit.model_classes(), audit.tag(spec), steps_of(spec)
    title = f"Multi-targeted PGD{tag}"
    if classes < 2:
        return finding(name, title, "", "", "skip", "fewer than two classes")
    targets = min(9, classes - 1)
    t_spec = spec.replace(type="t-pgd", loss="cw", target_classes=targets).without(
        "momentum", "kappa", "clip_start", "start")
    flags = audit.measure(f"T-PGD-{k} x{targets} targets{tag}", t_spec)
    base = audit.base_of(spec)
    verdict, stats = compare(base, flags, s.tolerance, s.significance)
    return finding(name, title,
                   f"PGD on the targeted margin towards each of the {targets} classes ranked next (Gowal et al. "
                   f"2019's multi-targeted attack) may not lower robust accuracy by more than {pct(s.tolerance)} "
                   f"below PGD-{k}",
                   "Gowal et al. 2019 (multi-targeted); Croce & Hein 2020 (APGD-T)", verdict,
                   f"PGD-{k}{tag} {pct(accuracy(base))}, multi-targeted {pct(accuracy(flags))}",
                   "an untargeted attack misses what targets find: report APGD-T (or AutoAttack) for this column",
                   accuracy=accuracy(flags), **stats)


@check("silent", group="convergence", needs_gradients=True)
def silent(audit: Auditor) -> dict:
    """Best-iterate PGD (the first misclassified iterate kept) against the last iterate; the loss trace kept."""
    s, a = audit.settings, audit.attack
    label = f"PGD-{audit.steps} best iterate"
    base = audit.base()
    clean = audit.correct()
    robust, traces, counts = [], [], {}
    for b, start in enumerate(range(0, len(audit.x), audit.batch_size)):
        xb, yb = audit.x[start:start + audit.batch_size], audit.y[start:start + audit.batch_size]
        cb = clean[start:start + audit.batch_size]
        out = cb.clone()
        if cb.any():
            atk = from_spec(a, audit.model, seed=batch_seed(audit.seed, b))
            atk.best_iterate, atk.keep_trace = True, True
            adv = atk.perturb(xb[cb], yb[cb])
            out[cb], found = judge(audit.model, xb[cb], adv, yb[cb], a.eps, a.norm)
            counts = add_counts(counts, found)
            if len(traces) < s.surface_examples and getattr(atk, "loss_trace", None) is not None:
                traces += atk.loss_trace.t().tolist()[: s.surface_examples - len(traces)]
        robust.append(out)
    flags = audit.keep(label, bits(torch.cat(robust)) if robust else "", a, counts)
    audit.loss_trace = {"steps": list(range(1, audit.steps + 1)), "losses": traces}
    # per example: the attack passed through an adversarial point and returned one the model classifies right
    silent_at = [i for i, (p, q) in enumerate(zip(base, flags)) if p == "1" and q == "0"]
    silent = len(silent_at)
    verdict, stats = compare(base, flags, s.tolerance, s.significance)
    share = silent / max(len(flags), 1)
    verdict = worst([verdict, "fail" if share > s.tolerance else "warn" if silent else "pass"])
    return finding("silent", "Silent success: best iterate against last iterate, per example",
                   f"per example, PGD-{audit.steps} may not return a point the model classifies right after passing "
                   "through one it misclassifies (Pintor et al. 2022's silent success: the attack found an "
                   "adversarial example and left it): any such example warns, more than "
                   f"{pct(s.tolerance)} of the examples, or the best iterate lowering robust accuracy by more than "
                   f"{pct(s.tolerance)} significantly, fails",
                   "Pintor et al. 2022, Indicators of Attack Failure (silent success)", verdict,
                   f"last iterate {pct(accuracy(base))}, best iterate {pct(accuracy(flags))}: {silent} silent "
                   f"successes" + (f" (examples {', '.join(map(str, silent_at[:8]))}"
                                   + (", ..." if silent > 8 else "") + ")" if silent else ""),
                   "report the best iterate (the attack's first adversarial point) for this column, "
                   "or a smaller step", silent=silent, silent_examples=silent_at, trace=audit.loss_trace, **stats)


@check("columns", group="convergence")
def columns(audit: Auditor) -> list[dict]:
    """Every reported column against the best known robust accuracy at its budget: the per-example worst case
    over every attack measured there (the columns, the audit's own, Square, transfer)."""
    s, out = audit.settings, []
    for name in audit.reported:
        label = f"column {name}"
        spec, flags = audit.specs[label], audit.flags[label]
        if spec.clean or len(flags) != len(audit.y):
            continue
        best, labels = audit.best_known(spec)
        verdict, stats = compare(flags, best, s.tolerance, s.significance)
        broken = {lb.removeprefix("column "): sum(1 for p, q in zip(flags, audit.flags[lb])
                                                  if p == "1" and q == "0") for lb in labels if lb != label}
        beaten_by = sorted((lb for lb, k in broken.items() if k), key=lambda lb: -broken[lb])
        out.append(finding(label, f"Reported column {name}",
                           f"the column may not stand more than {pct(s.tolerance)} above the best known robust "
                           f"accuracy at its budget ({spec.norm} eps {spec.eps:.4g}: per example, "
                           f"robust under every attack measured there, the audit's and the table's), significantly "
                           "(exact one-sided McNemar test on the examples it leaves robust that another breaks)",
                           "Carlini et al. 2019, Sec. 5.2 (report the worst case over attacks); Croce & Hein 2020",
                           verdict, f"{name} {pct(accuracy(flags))}, best known {pct(accuracy(best))}: "
                           f"{100 * stats['gap']:+.1f} points, {stats['only_base_robust']} examples it leaves robust "
                           f"that another attack breaks (p = {stats['p']:.2g})",
                           f"the column overstates robustness: report the best known {pct(accuracy(best))} (the "
                           f"per-example worst case) or add the attacks that beat it ({', '.join(beaten_by[:3])})",
                           column=name, accuracy=accuracy(flags), best_known=accuracy(best), attacks=labels,
                           beaten_by=beaten_by, **stats))
    return out
