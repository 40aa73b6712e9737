"""The masking group's checks (can the model's gradients be trusted at all), one registered function each: its graph,
its outputs, its input gradients and how well they predict the loss, the loss surface, FGSM against the iterative
attacks, robust accuracy against the budget up to one at which any model fails, AutoAttack and its own checks, the
attacks without the model's gradients against the white-box worst case (black box, transfer, random sampling,
decisions), the adaptive attacks (:mod:`.adaptive`), randomness in the forward pass (EOT) and finite logits
(docs/audit.md: each check's rule and source)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from tradeoff.attacks import from_spec, frozen
from tradeoff.attacks.autoattack import STANDARD, CheckLog, isolated_rng, model_checks
from tradeoff.attacks.base import add_counts, judge, project, random_start, steepest_step
from tradeoff.attacks.declared import DECLARED as ATTACK_DECLARATIONS
from tradeoff.attacks.loop import batch_seed
from tradeoff.audit.adaptive import ROUNDING, adaptive
from tradeoff.audit.auditor import Auditor, apgd, steps_of
from tradeoff.audit.registry import check
from tradeoff.audit.verdicts import accuracy, check_both_norms, compare, finding, group_of, pct, worst
from tradeoff.core.spec import AttackSpec
from tradeoff.storage.layout import bits


def grey_budget(norm: str, x: torch.Tensor) -> float:
    """The budget within which every image in [0, 1]^d lies of the mid-grey image (L-inf 0.5; L2 0.5 sqrt(d)): an
    attack can make every test image that one image, so a model gets right at most the test examples of the class
    it gives it (the mid-grey bound)."""
    return 0.5 if norm == "linf" else 0.5 * math.sqrt(x[0].numel())


def must_fail_budget(norm: str, x: torch.Tensor) -> float:
    """The budget at which every model must fail: the whole image range (L-inf 1; L2 sqrt(d)), within which any
    test image can be made any image, one of another class among them."""
    return 1.0 if norm == "linf" else math.sqrt(x[0].numel())


def _is_probabilities(out: torch.Tensor) -> bool:
    return bool(out.numel()) and bool((out >= 0).all()) and bool(((out.sum(1) - 1).abs() < 1e-4).all())


@check("graph", group="masking")
def graph(audit: Auditor) -> dict:
    """A forward pass on an input that requires a gradient must give an output that depends on it."""
    xb = audit.x[: min(len(audit.x), 8)].detach().clone().requires_grad_(True)
    rule = ("the model's output must depend on its input through autograd (else every gradient attack fails "
            "with an error or does nothing: a wrapper that detaches its input, a no-grad forward)")
    source = "Athalye et al. 2018, Sec. 4.1 (BPDA for parts without a gradient); Carlini et al. 2019, Sec. 5.5"
    with frozen(audit.model):
        out = audit.model(xb)
        ok = out.requires_grad
        if ok:
            (grad,) = torch.autograd.grad(out.float().sum(), xb, allow_unused=True)
            ok = grad is not None
    if not ok:
        audit.graph_broken, audit.usable = True, False
        return finding("graph", "The model's computation graph", rule, source, "fail",
                       "the output does not depend on the input through autograd: no gradient attack can run",
                       "make the forward differentiable, or attack through BPDA (Athalye et al. 2018: the "
                       "non-differentiable part's backward as the identity); report Square and transfer meanwhile")
    return finding("graph", "The model's computation graph", rule, source, "pass",
                   "the output has an input gradient")


@check("outputs", group="masking")
def outputs(audit: Auditor) -> dict:
    with torch.no_grad():
        out = audit.model(audit.x[:audit.batch_size]).float()
    probs = _is_probabilities(out)
    return finding("outputs", "Logits, not probabilities",
                   "the model's outputs must be logits: outputs that are probabilities (non-negative, summing to 1) "
                   "make the attacks' cross-entropy the log of a softmax of probabilities, whose gradients vanish",
                   "Carlini et al. 2019, Sec. 4.4; Croce & Hein 2020 (check_range_output)",
                   "fail" if probs else "pass",
                   "the outputs are probabilities (each row non-negative, summing to 1)" if probs else
                   "the outputs are not probabilities", "return the logits (or attack log(outputs) as the logits)",
                   probabilities=probs)


@check("gradients", group="masking")
def gradients(audit: Auditor) -> dict:
    s = audit.settings
    if audit.graph_broken:
        return finding("gradients", "Input gradients on the test points", "", "", "skip",
                       "n/a: the model's graph is broken (the graph check)")
    correct = audit.correct()
    grads = audit.gradients(audit.x[correct], audit.y[correct])
    finite = torch.isfinite(grads).all(1)
    zero = (grads == 0).all(1) & finite
    n = max(len(grads), 1)
    zero_frac, nonfinite = float(zero.sum()) / n, float((~finite).sum()) / n
    norms = grads[finite].norm(dim=1)
    median = float(norms.median()) if len(norms) else float("nan")
    verdict = ("fail" if zero_frac + nonfinite > s.max_zero_gradients else
               "warn" if zero_frac + nonfinite > 0 else "pass")
    if verdict == "fail":
        audit.usable = False
    return finding("gradients", "Input gradients on the test points",
                   f"at most {pct(s.max_zero_gradients)} of the correctly classified test points may have an "
                   "input gradient of the loss that is all zero (or not finite): PGD's L-inf step is its sign, so "
                   "such a point is never moved (shattered or vanishing gradients); any such point: warn",
                   "Athalye et al. 2018, Sec. 4 (shattered and vanishing gradients); Carlini et al. 2019, Sec. 5.5",
                   verdict, f"{pct(zero_frac)} all-zero, {pct(nonfinite)} not finite, median L2 norm "
                   f"{median:.3g} ({len(grads)} points)",
                   "find the part without a gradient (quantisation, saturation) and attack through BPDA or a "
                   "straight-through estimator; for saturated logits, the CW or DLR loss; report Square meanwhile",
                   zero_fraction=zero_frac, nonfinite_fraction=nonfinite, median_norm=median, points=len(grads))


@check("consistency", group="masking", needs_gradients=True)
def consistency(audit: Auditor) -> dict:
    """Exploding or noisy gradients: the gradient must predict the loss one small step along it gives (first
    order), and stay pointed the same way under a much smaller input noise."""
    s, eps, norm = audit.settings, audit.attack.eps, audit.attack.norm
    idx = audit.correct().nonzero().squeeze(1)[:s.consistency_examples]
    x, y = audit.x[idx], audit.y[idx]
    grads = audit.gradients(x, y).view_as(x)
    keep = (grads.flatten(1).abs().sum(1) > 0) & torch.isfinite(grads.flatten(1)).all(1)
    x, y, grads = x[keep], y[keep], grads[keep]
    if not len(x):
        return finding("consistency", "Gradients that predict the loss", "", "", "skip",
                       "n/a: no correctly classified point with a non-zero gradient")
    t = eps / 10
    d = steepest_step(grads, norm)
    gen = torch.Generator(device=x.device).manual_seed(audit.seed)
    noise = (torch.rand(x.shape, generator=gen, device=x.device, dtype=x.dtype) * 2 - 1) * (eps / 100)
    other = audit.gradients((x + noise).clamp(0, 1), y).view_as(x)
    with torch.no_grad():
        before = F.cross_entropy(audit.model(x).float(), y, reduction="none")
        after = F.cross_entropy(audit.model((x + t * d).clamp(0, 1)).float(), y, reduction="none")
        predicted = t * (grads * d).flatten(1).sum(1)
        ratio = ((after - before) / predicted.clamp_min(1e-12))
        cosine = F.cosine_similarity(grads.flatten(1), other.flatten(1), dim=1)
    median_ratio, median_cos = float(ratio.median()), float(cosine.median())
    verdict = "fail" if median_ratio < 0.1 else "warn" if (median_ratio < 0.3 or median_cos < 0.5) else "pass"
    return finding("consistency", "Gradients that predict the loss (exploding or noisy gradients)",
                   f"a step of eps/10 along the gradient's steepest-ascent direction must raise the loss by at least "
                   f"0.3x what the gradient predicts (first order; median over {len(x)} points; below 0.1: fail), "
                   f"and the gradient under uniform input noise of eps/100 must keep a median cosine of 0.5 with "
                   f"the gradient without it (else warn): a gradient far larger than the loss it moves, or one that "
                   f"turns under tiny noise, is exploding or noisy (a high-frequency wrapper)",
                   "Athalye et al. 2018, Sec. 4 (exploding, shattered gradients); Carlini et al. 2019, Sec. 5.5",
                   verdict, f"median realised/predicted loss rise {median_ratio:.2f}, median cosine under noise "
                   f"{median_cos:.2f} ({len(x)} points)",
                   "smooth the gradient: attack through BPDA of the noisy part, or EOT over input noise; "
                   "report Square and transfer beside the gradient attacks",
                   ratio=median_ratio, cosine=median_cos, points=len(x))


@check("surface", group="masking", needs_gradients=True)
def surface(audit: Auditor) -> dict:
    s, eps, norm = audit.settings, audit.attack.eps, audit.attack.norm
    idx = audit.correct().nonzero().squeeze(1)[:s.surface_examples]
    x, y = audit.x[idx], audit.y[idx]
    gen = torch.Generator(device=x.device).manual_seed(audit.seed)
    toward = steepest_step(audit.gradients(x, y).view_as(x), norm)
    noise = (torch.randint(0, 2, x.shape, generator=gen, device=x.device, dtype=x.dtype) * 2 - 1
             if norm == "linf" else torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype))
    random_dir = steepest_step(noise, norm)
    ts = torch.linspace(0, eps, s.surface_points).tolist()
    traces: dict[str, list[list[float]]] = {"gradient": [], "random": []}
    with torch.no_grad():
        for name, d in (("gradient", toward), ("random", random_dir)):
            per_t = [F.cross_entropy(audit.model((x + t * d).clamp(0, 1)).float(), y, reduction="none")
                     for t in ts]
            traces[name] = torch.stack(per_t, 1).tolist() if len(x) else []
    wins = sum(1 for g, r in zip(traces["gradient"], traces["random"]) if g[-1] > r[-1])
    shown = len(traces["gradient"])
    verdict = "skip" if not shown else ("fail" if wins < shown / 2 else "pass")
    return finding("surface", "The loss along the gradient and along a random direction",
                   "a step of the full budget along the gradient's steepest-ascent direction must raise the loss "
                   "more than one along a random direction for at least half of the examples traced (else the "
                   "gradient does not point uphill: a masked or noisy loss surface)",
                   "Carlini et al. 2019, Sec. 5.5 (loss landscape); Athalye et al. 2018", verdict,
                   f"the gradient direction ends higher on {wins} of {shown} examples",
                   "the gradient does not point uphill: attack through BPDA or EOT of the part that masks it; "
                   "report Square and transfer", t=ts, traces=traces, wins=wins, examples=shown)


@check("fgsm", group="masking", needs_gradients=True)
def fgsm(audit: Auditor) -> dict:
    """FGSM (one step of the whole budget from x) against the audit's iterative attack."""
    s, a = audit.settings, audit.attack
    spec = AttackSpec.from_dict({"type": "fgsm", "norm": str(a.norm), "eps": a.eps})
    audit.base()
    iterative = [lb for lb in audit.at(a, white_box_only=True) if lb != "FGSM"]
    fgsm = audit.measure("FGSM", spec)
    base = audit.all_robust(["clean", *iterative])
    verdict, stats = compare(base, fgsm, s.tolerance, s.significance)
    return finding("fgsm", "A single step (FGSM) against the iterative attacks",
                   f"FGSM may not lower robust accuracy by more than {pct(s.tolerance)} below the worst case of "
                   f"the iterative white-box attacks measured so far (PGD-{audit.steps}, APGD, restarts, other "
                   "losses, targets; significantly: fail; not: warn): iterative attacks that a single step beats "
                   "are led astray by the gradients they follow (masked or misleading gradients near the input; "
                   "one weak attack alone is the steps check's finding)",
                   "Carlini et al. 2019, Sec. 5.2 (iterative attacks should beat single-step ones); Athalye et al. "
                   "2018 (the checklist)", verdict,
                   f"iterative white box (worst case of {len(iterative)}) {pct(accuracy(base))}, FGSM "
                   f"{pct(accuracy(fgsm))}",
                   "the iterative attack's gradients mislead it away from the input: attack through BPDA/EOT, "
                   "report the worst case with FGSM and gradient-free attacks", accuracy=accuracy(fgsm),
                   pgd=accuracy(base), **stats)


@check_both_norms("eps", "L2: robust accuracy against the budget", group="masking")
def _eps_check(audit: Auditor, name: str, spec: AttackSpec) -> dict:
    s, eps, norm = audit.settings, spec.eps, spec.norm
    grey, top = grey_budget(norm, audit.x), must_fail_budget(norm, audit.x)
    budgets = sorted({eps * m for m in s.eps_multipliers if eps * m < grey} | {grey, top})
    tag = "" if spec is audit.attack else f" {norm.upper()}"
    n = max(steps_of(spec), 20)  # APGD's step starts at 2 eps and adapts: every budget reachable

    def label(b: float) -> str:
        return f"APGD-CE-{n}{tag}" + ("" if b == eps else f" at eps {b:.4g}")

    curve = [(b, accuracy(audit.measure(label(b), apgd(spec.replace(eps=b), n)))) for b in budgets]
    with torch.no_grad():
        grey_class = audit.model(torch.full((2, *audit.x.shape[1:]), 0.5, device=audit.x.device,
                                              dtype=audit.x.dtype)).argmax(1)[0].item()
    bound = float((audit.y == grey_class).float().mean())
    at = dict(curve)
    rises = [(a, b) for (_, a), (_, b) in zip(curve, curve[1:]) if b > a + s.tolerance]
    over_grey = at[grey] > bound + s.tolerance
    verdict = "fail" if (at[top] > s.top_accuracy or over_grey) else ("warn" if rises else "pass")
    what = "L-inf 1, the whole image range" if norm == "linf" else f"L2 {top:.4g}, the whole image range"
    return finding(name, f"{norm.upper()}: robust accuracy against the budget, up to one at which any model fails",
                   f"APGD-CE-{n} (its step starts at twice the budget and adapts, so every budget is reachable) at "
                   f"each budget: at {what} (any image can be made any other, one of another class among them) robust accuracy "
                   f"must be at most {pct(s.top_accuracy)}; at {norm} eps {grey:.4g} (every image within it of the "
                   f"mid-grey image) at most the mid-grey bound {pct(bound)} (the test examples of the class the "
                   f"model gives that image) plus {pct(s.tolerance)}: above either, masked gradients or a bug "
                   "(fail); accuracy must not rise with the budget (warn)",
                   "Carlini et al. 2019, Sec. 5.3 (unbounded attacks must succeed); Athalye et al. 2018", verdict,
                   ", ".join(f"eps {b:.4g}: {pct(a)}" for b, a in curve) + f" (mid-grey bound {pct(bound)})",
                   "the attack cannot reach points any model gets wrong: the gradients are masked; attack "
                   "through BPDA/EOT and report Square", curve=curve, grey_bound=bound, grey_eps=grey,
                   must_fail_eps=top)


@check("autoattack", group="masking")
def autoattack(audit: Auditor) -> dict:
    """AutoAttack's own checks of the defence, and AutoAttack itself (the official code) at the attack's budget
    and the L2 one: part of the audit's suite, so that its best known robust accuracy is never above AutoAttack's;
    its warnings (its checks, and the final check of its adversarial examples: NaN values, the budget, the range)
    kept with the measurement."""
    log = CheckLog()
    xb, yb = audit.x[:audit.batch_size], audit.y[:audit.batch_size]
    model_checks(audit.model, xb, yb, STANDARD, 9, log)
    warned = list(log.warnings)
    ran, notes = {}, []
    for spec in (audit.autoattack, audit.autoattack_l2):
        if spec is None:
            continue
        label = "AutoAttack" + ("" if str(spec.norm) == str(audit.attack.norm) else f" {str(spec.norm).upper()}")
        try:
            ran[label] = accuracy(audit.measure(label, spec))
        except Exception as exc:  # e.g. a graph without gradients: the other attacks stand in
            audit.errors[label] = f"{type(exc).__name__}: {exc}"
            notes.append(f"{label} could not run ({type(exc).__name__}: {exc})")
            continue
        warned += [f"{label}: {w}" for w in audit.warnings.get(label, []) if w not in log.warnings]
    suite = (", ".join(f"{lb} {pct(a)}" for lb, a in ran.items()) or "AutoAttack not run") + (
        "" if audit.autoattack is not None else " (left out of the suite: autoattack is null)")
    return finding("autoattack", "AutoAttack, and its own checks of the defence",
                   "AutoAttack (the official code) runs at the attack's budget and the L2 one as part of the suite; "
                   "its checks (pyautoattack.checks: a randomized defence, outputs that are probabilities, a dynamic "
                   "defence, too few classes for the targeted attacks) and the final check of its adversarial "
                   "examples (NaN values, the budget, the image range) must raise no warning (warn)",
                   "Croce & Hein 2020 (AutoAttack and its checks)", "warn" if warned or notes else "pass",
                   suite + "; " + ("; ".join(warned + notes) or "no warning"),
                   "read AutoAttack's warning: for a randomized defence its rand version (EOT), for probabilities "
                   "the logits, for NaN values the model's gradient", warnings=warned, accuracies=ran, notes=notes)


def _against_white_box(audit: Auditor, name: str, title: str, label: str, flags: str, source: str, what: str,
                       next_step: str, spec: AttackSpec | None = None) -> dict:
    """An attack without the model's gradients against the white-box worst case at the budget: in aggregate
    (compare) and per example (the examples only it breaks: masking on a subset)."""
    s = audit.settings
    wb = audit.white_box(spec)
    verdict, stats = compare(wb, flags, s.tolerance, s.significance)
    only = stats["only_base_robust"]
    share = only / max(len(flags), 1)
    per_example = "fail" if share > s.tolerance else "warn" if share > s.tolerance / 4 else "pass"
    return finding(name, title, f"{what} may not lower robust accuracy by more than {pct(s.tolerance)} below the "
                   f"worst case of the white-box attacks, nor break more than {pct(s.tolerance)} of the examples "
                   f"every white-box attack leaves robust (per example: masking on a subset; more than "
                   f"{pct(s.tolerance / 4)}: warn)", source, worst([verdict, per_example]),
                   f"{label} {pct(accuracy(flags))}, white box (worst case) {pct(accuracy(wb))}; {only} examples "
                   f"only {label} breaks", next_step, accuracy=accuracy(flags), white_box=accuracy(wb),
                   only_breaks=only, only_share=share, **stats)


@check("black-box", group="masking")
def black_box(audit: Auditor) -> dict:
    return _black_box_check(audit, "black-box", audit.black_box, audit.attack)


@check("black-box-l2", group="masking")
def black_box_l2(audit: Auditor) -> dict:
    if audit.l2 is None:
        return finding("black-box-l2", "L2: black-box (Square)", "", "", "skip", "no L2 budget for the dataset")
    spec = None if audit.black_box is None else audit.black_box.replace(norm="l2", eps=audit.l2.eps)
    return _black_box_check(audit, "black-box-l2", spec, audit.l2)


def _black_box_check(audit: Auditor, name: str, square: AttackSpec | None, at: AttackSpec) -> dict:
    tag = audit.tag(at)
    title = f"Black-box (Square) against white-box attacks{tag}"
    if square is None:
        return finding(name, title, "", "", "skip", "no black-box attack configured")
    flags = audit.measure(f"Square{tag}", square)
    return _against_white_box(audit, name, title, f"Square{tag}", flags,
                                   "Athalye et al. 2018, Sec. 3.1; Croce & Hein 2020 (Square in AutoAttack)",
                                   "a gradient-free attack (Square, at the same budget)",
                                   "the gradients are masked (on the examples Square alone breaks): report "
                                   "AutoAttack (Square included) and attack through BPDA/EOT", at)


@check_both_norms("transfer", "L2: transfer", group="masking")
def _transfer_check(audit: Auditor, name: str, spec: AttackSpec) -> dict:
    tag = audit.tag(spec)
    title = f"Transfer from a surrogate against white-box attacks{tag}"
    if audit.surrogate is None:
        return finding(name, title, "", "", "skip", audit.no_surrogate)
    label = f"transfer PGD-{steps_of(spec)}{tag}"
    if label not in audit.flags:
        robust, counts = [], {}
        for b, start in enumerate(range(0, len(audit.x), audit.batch_size)):
            xb, yb = audit.x[start:start + audit.batch_size], audit.y[start:start + audit.batch_size]
            adv = from_spec(spec, audit.surrogate.eval(), seed=batch_seed(audit.seed, b)).perturb(xb, yb)
            right, found = judge(audit.model, xb, adv, yb, spec.eps, spec.norm)
            with torch.no_grad():
                robust.append((audit.model(xb).argmax(1) == yb) & right)
            counts = add_counts(counts, found)
        audit.keep(label, bits(torch.cat(robust)), spec, counts)
    return _against_white_box(audit, name, title, "transfer", audit.flags[label],
                                   "Athalye et al. 2018, Sec. 3.1; Tramer et al. 2020",
                                   "adversarial examples of the same attack on the surrogate",
                                   "the model's own gradients are masked where the surrogate's are not: attack "
                                   "through BPDA/EOT, report the transfer attack's number beside the white box",
                                   spec)


@check_both_norms("random", "L2: random sampling", group="masking")
def _random_check(audit: Auditor, name: str, spec: AttackSpec) -> dict:
    """``random_samples`` points drawn uniformly in the eps-ball of each example (clipped to [0, 1]): an example
    any of them breaks is broken. Against the white-box worst case per example: random points that find what
    gradient attacks missed mean the gradients mislead (Athalye et al. 2018's checklist)."""
    n, tag = audit.settings.random_samples, audit.tag(spec)
    label = f"random sampling x{n}{tag}"
    if label not in audit.flags:
        robust = []
        for b, start in enumerate(range(0, len(audit.x), audit.batch_size)):
            xb, yb = audit.x[start:start + audit.batch_size], audit.y[start:start + audit.batch_size]
            gen = torch.Generator(device=xb.device).manual_seed(batch_seed(audit.seed + 104729, b))
            with torch.no_grad():
                out = torch.isfinite(logits := audit.model(xb)).all(1) & (logits.argmax(1) == yb)
                for _ in range(n):
                    point = (xb + random_start(xb, spec.eps, spec.norm, gen)).clamp(0, 1)
                    logits = audit.model(point)
                    out &= torch.isfinite(logits).all(1) & (logits.argmax(1) == yb)
            robust.append(out)
        audit.keep(label, bits(torch.cat(robust)), spec.replace(type="random"))
    return _against_white_box(audit, 
        name, f"Random sampling in the eps-ball against white-box attacks{tag}", "random sampling",
        audit.flags[label], "Athalye et al. 2018, Sec. 3.1 and 5 (random sampling finds what gradient descent "
        "misses); Carlini et al. 2019, Sec. 5.5 (brute-force random search)",
        f"{n} points drawn uniformly in each example's eps-ball", "the gradient attacks miss examples that "
        "random noise breaks: their gradients are masked there; attack through BPDA/EOT, report the worst case "
        "with gradient-free attacks", spec)


@check("decision", group="masking")
def decision(audit: Auditor) -> dict:
    """RayS (a decision-based attack: the model's predicted class only) at the L-inf budget."""
    title = "A decision-based (hard-label) attack against white-box attacks"
    at = audit.attack if str(audit.attack.norm) == "linf" else None
    if at is None:
        return finding("decision", title, "", "", "skip", "RayS is an L-inf attack; the audit's attack is not")
    spec = AttackSpec.from_dict({"type": "rays", "norm": "linf", "eps": at.eps,
                                 "queries": audit.settings.decision_queries})
    flags = audit.measure(f"RayS x{audit.settings.decision_queries} queries", spec)
    return _against_white_box(audit, "decision", title, "RayS", flags,
                                   "Chen & Gu 2020 (RayS); Brendel et al. 2018 (decision-based attacks); "
                                   "Carlini et al. 2019, Sec. 5.4 (gradient-free attacks)",
                                   f"RayS ({audit.settings.decision_queries} decisions per example)",
                                   "the gradient attacks miss what an attack on the decisions alone finds: "
                                   "their gradients are masked; attack through BPDA/EOT", at)


@check_both_norms("bpda", "L2: BPDA", group="masking")
def _bpda_check(audit: Auditor, name: str, spec: AttackSpec) -> dict:
    """Where masking is suspected (the gradients unusable or not predicting the loss, a check of the masking
    group not passing so far, or a model that names a ``preprocess``), the adaptive attacks: BPDA (the identity
    backward for the model's ``preprocess``, else for every rounding-like operation) with APGD-CE and its
    restarts and APGD-T (its targets); where BPDA's gradients are unusable too, NES (the gradient estimated from
    the outputs) with APGD-DLR. Judged on the model itself; the per-example worst case enters the best known
    robust accuracy (an upper bound where masking fails)."""
    s, tag = audit.settings, audit.tag(spec)
    title = f"Adaptive attacks: BPDA / straight-through and NES with APGD{tag}"
    staged = audit.staged()
    suspect = (not audit.usable) or staged is not None or any(
        v == "fail" for n, v in audit.verdicts.items() if group_of(n) == "masking") or any(
        audit.verdicts.get(n) == "warn" for n in ("gradients", "consistency", "surface"))
    if not suspect:
        return finding(name, title, "", "", "skip", "n/a: no sign of masking (the gradients are usable and predict "
                                                   "the loss; no masking check so far fails)")
    wb = audit.white_box(spec)
    found, parts = adaptive(audit, spec)
    label = f"adaptive{tag}"
    flags = audit.keep(label, audit.all_robust(list(found)) if found else audit.clean(), spec.replace(type="bpda"))
    verdict, stats = compare(wb, flags, s.tolerance, s.significance)
    return finding(name, title,
                   "the adaptive attacks (BPDA: " + ("the model's preprocess as the identity in the backward pass"
                                                     if staged is not None else "every rounding-like operation "
                                                     f"({', '.join(ROUNDING)}) as the identity backward") +
                   f", with APGD-CE ({s.adaptive_restarts} restarts) and APGD-T; NES with APGD-DLR where BPDA's "
                   f"gradients are unusable too) may not lower robust accuracy by more than {pct(s.tolerance)} "
                   "below the white-box worst case",
                   "Athalye et al. 2018, Sec. 4.1 (BPDA); Tramer et al. 2020 (adaptive attacks); Ilyas et al. "
                   "2018 (NES)", verdict,
                   "; ".join(f"{lb} {pct(accuracy(f))}" for lb, f in found.items()) + (", " if found else "")
                   + f"worst case {pct(accuracy(flags))}, white box (worst case) {pct(accuracy(wb))}"
                   + ("; " + "; ".join(parts) if parts else ""),
                   "a part of the model has no useful gradient: report the adaptive attacks' worst case (an upper "
                   "bound) and attack through BPDA with a differentiable approximation of that part",
                   accuracy=accuracy(flags), white_box=accuracy(wb), attacks=list(found), notes=parts, **stats)


@check("randomness", group="masking")
def randomness(audit: Auditor) -> dict:
    """Two halves: the spread of the predictions over draws, and EOT (with draws sized from the gradient's
    variance) against one draw; a model that reseeds the RNG in its forward (the same draw every pass) warns."""
    s = audit.settings
    stacked, used, reseeded = _draws(audit, audit.x, s.eot_draws)
    scale = 1.0 + float(stacked.abs().max()) if stacked.numel() else 1.0
    out_varies = float((stacked - stacked[0]).abs().max()) > 1e-4 * scale if stacked.numel() else False
    grads = _gradient_draws(audit, min(s.eot_draws, 8)) if not audit.graph_broken else None
    grad_varies = grads is not None and grads.numel() > 0 and bool(
        (grads - grads[0]).abs().amax() > 1e-5 * (1 + float(grads.abs().amax())))
    preds = stacked.argmax(2)
    spread = float((preds != preds[0]).any(0).float().mean()) if preds.numel() else 0.0
    rule = (f"{s.eot_draws} forward passes of the same inputs (the global RNG seeded anew before each) must give "
            f"the same outputs and input gradients (else warn: a randomized model); its predictions may change on "
            f"at most {pct(s.tolerance)} of the examples (first half), and PGD with EOT (each step's gradient the "
            f"mean over as many draws as the gradient's variance needs, at least {s.eot_draws}, at most "
            f"{s.max_eot_draws}) may not lower the robust accuracy (majority of the draws) by more than "
            f"{pct(s.tolerance)} below PGD on one draw (second half; fail: one draw's evaluation does not "
            "measure it). A model that reseeds the RNG in its forward pass (every pass the same draw): warn")
    source = "Athalye et al. 2018, Sec. 4.2 (EOT); Tramer et al. 2020; Croce & Hein 2020 (check_randomized)"
    title = "Randomness in the forward pass (EOT)"
    if not (out_varies or grad_varies):
        if reseeded:
            return finding("randomness", title, rule, source, "warn",
                           f"{s.eot_draws} forward passes give the same outputs, but the model reseeds the global "
                           "RNG in its forward pass: a random defence whose every pass draws the same randomness",
                           "remove the reseeding (or seed per pass) and audit again: one fixed draw's evaluation "
                           "does not measure the random defence; then EOT", varies=False, spread=0.0,
                           reseeded=True, rng_used=used)
        return finding("randomness", title, rule, source, "pass",
                       f"{s.eot_draws} forward passes give the same outputs and gradients", varies=False,
                       spread=0.0, reseeded=False, rng_used=used)
    needed = s.eot_draws
    if grads is not None and grads.numel() and len(grads) > 1:
        # per point: the draws' variance (its trace) and the squared norm of the expected gradient (the mean's,
        # less the variance it carries); the draws that bring the mean's standard error to half that norm
        g = len(grads)
        mean = grads.mean(0)
        var = ((grads - mean) ** 2).sum(2).sum(0) / (g - 1)
        signal = ((mean ** 2).sum(1) - var / g).clamp_min(0)
        per = torch.where(signal > 0, var / (0.25 * signal).clamp_min(1e-30), torch.full_like(var, float("inf")))
        needed = int(min(max(math.ceil(min(float(per.median()), 1e9)), s.eot_draws), s.max_eot_draws))
    audit.randomized = out_varies
    plain = _majority_robust(audit, audit.attack, eot=False, draws=s.eot_draws)
    eot = _majority_robust(audit, audit.attack, eot=True, draws=needed)
    if audit.l2 is not None:  # the L2 budget's figure, judged by the majority too
        _majority_robust(audit, audit.l2, eot=True, draws=needed)
    verdict, stats = compare(plain, eot, s.tolerance, s.significance)
    halves = {"spread": "fail" if spread > s.tolerance else "pass", "eot": verdict}
    verdict = worst([*halves.values(), "warn"])
    return finding("randomness", title, rule, source, verdict,
                   f"outputs {'vary' if out_varies else 'do not vary'}, gradients "
                   f"{'vary' if grad_varies else 'do not'} between passes; predictions change on {pct(spread)} of "
                   f"the examples; PGD {pct(accuracy(plain))}, EOT-PGD over {needed} draws {pct(accuracy(eot))} "
                   f"(majority of {s.eot_draws} draws)" + ("; the best known robust accuracy is taken over the "
                                                           "majority-vote measurements only" if out_varies else ""),
                   f"a randomized model: report EOT-PGD over {needed} draws (or more) and the majority vote of the "
                   "draws, not one draw's evaluation", varies=True, spread=spread, pgd=accuracy(plain),
                   eot_pgd=accuracy(eot), eot_draws=needed, halves=halves, reseeded=reseeded, **stats)


def _draws(audit: Auditor, x: torch.Tensor, n: int) -> tuple[torch.Tensor, bool, bool]:
    """``n`` forward passes of x, each after seeding the global RNG anew (a model that draws from it varies);
    (the outputs, whether the model used the global RNG, whether it reseeded it: the state it leaves is the same
    whatever it was given)."""
    outs, used, afters = [], False, []
    with torch.no_grad(), isolated_rng(x.device):
        for i in range(n):
            torch.manual_seed(audit.seed * 7 + 10007 + i)
            before = torch.get_rng_state()
            outs.append(torch.cat([audit.model(x[j:j + audit.batch_size]).float()
                                   for j in range(0, len(x), audit.batch_size)]))
            after = torch.get_rng_state()
            used |= not torch.equal(before, after)
            afters.append(after)
    reseeded = used and n > 1 and all(torch.equal(afters[0], a) for a in afters[1:])
    return torch.stack(outs), used, reseeded


def _gradient_draws(audit: Auditor, n: int) -> torch.Tensor:
    """``n`` draws of the CE's input gradient at (up to 32) correctly classified points."""
    idx = audit.correct().nonzero().squeeze(1)[:32]
    out = []
    with isolated_rng(audit.x.device):
        for i in range(n):
            torch.manual_seed(audit.seed * 7 + 20011 + i)
            out.append(audit.gradients(audit.x[idx], audit.y[idx]))
    return torch.stack(out)


def _majority_robust(audit: Auditor, spec: AttackSpec, eot: bool, draws: int) -> str:
    """Per example, correct in most of ``eot_draws`` passes both clean and under PGD at ``spec``'s budget, whose
    gradient each step is one pass's (``eot`` false) or the mean over ``draws`` passes (Expectation over
    Transformation, Athalye et al. 2018); kept as a measurement judged by the majority vote."""
    a, votes_n = spec, audit.settings.eot_draws
    steps = steps_of(spec)
    step = spec.step_size if spec.step_size is not None else \
        ATTACK_DECLARATIONS[spec.type].step_for(float(spec.eps), steps)
    gen = torch.Generator(device=audit.x.device).manual_seed(audit.seed)
    out = []
    with isolated_rng(audit.x.device):
        torch.manual_seed(audit.seed)
        for start in range(0, len(audit.x), audit.batch_size):
            x, y = audit.x[start:start + audit.batch_size], audit.y[start:start + audit.batch_size]
            delta = (random_start(x, a.eps, a.norm, gen) if ATTACK_DECLARATIONS[a.type].settings(a).random_start
                     else torch.zeros_like(x))
            delta = (x + delta).clamp(0, 1) - x
            with frozen(audit.model):
                for _ in range(steps):
                    delta.requires_grad_(True)
                    loss = sum(F.cross_entropy(audit.model(x + delta).float(), y, reduction="sum")
                               for _ in range(draws if eot else 1))
                    (grad,) = torch.autograd.grad(loss, delta)
                    with torch.no_grad():
                        delta = project(delta + step * steepest_step(torch.nan_to_num(grad), a.norm), a.eps,
                                        a.norm)
                        delta = (x + delta).clamp(0, 1) - x
            with torch.no_grad():
                def votes(z):
                    return sum((torch.isfinite(o := audit.model(z)).all(1) & (o.argmax(1) == y)).int()
                               for _ in range(votes_n))
                out.append((votes(x) * 2 > votes_n) & (votes(x + delta) * 2 > votes_n))
    tag = audit.tag(spec)
    label = (f"EOT-PGD-{steps} ({draws} draws){tag}, majority of {votes_n}" if eot else
             f"PGD-{steps} (one draw){tag}, majority of {votes_n}")
    if label not in audit.votes:
        audit.votes.append(label)
    return audit.keep(label, bits(torch.cat(out)), spec.replace(type="eot"))


@check("finite", group="masking")
def finite(audit: Auditor) -> dict:
    """Non-finite logits on any finite input the audit gave the model (test images, attack points, random points
    of the ball), and on a few more: the mid-grey, black and white images and uniform noise."""
    shape = audit.x.shape[1:]
    gen = torch.Generator(device=audit.x.device).manual_seed(audit.seed + 17)
    extra = torch.cat([torch.full((2, *shape), v, device=audit.x.device, dtype=audit.x.dtype)
                       for v in (0.0, 0.5, 1.0)]
                      + [torch.rand((16, *shape), generator=gen, device=audit.x.device, dtype=audit.x.dtype)])
    with torch.no_grad():
        audit.model(extra)
    bad, seen = audit.model.nonfinite_count(), audit.model.seen
    per_attack = {lb: c["non_finite_logits"] for lb, c in audit.invalid.items() if c.get("non_finite_logits")}
    verdict = "fail" if bad or per_attack else "pass"
    return finding("finite", "Finite logits on every input",
                   "the model's logits must be finite on every finite input the audit gives it (the test images, "
                   "every attack's points, random points of the ball, the mid-grey, black and white images, uniform "
                   "noise): non-finite logits name no class (argmax reads a NaN row as class 0) and make every loss "
                   "and gradient there NaN", "Carlini et al. 2019, Sec. 5.5 (verify the evaluation); Croce & Hein "
                   "2020 (AutoAttack's NaN check)", verdict,
                   f"non-finite logits on {bad} of {seen} finite inputs" + (
                       "; on valid adversarial examples of " + ", ".join(f"{lb} ({n})" for lb, n in
                                                                          per_attack.items()) if per_attack else ""),
                   "find where the forward pass overflows or divides by zero (log of 0, 0/0, an exponential); "
                   "the examples there count as misclassified, and attacks stall on their NaN losses",
                   nonfinite=bad, inputs=seen, per_attack=per_attack)
