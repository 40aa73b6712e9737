"""The protocol group's check: the authors' attack of each table that shows the model against the strong attack it
stands in for (docs/audit.md)."""

from __future__ import annotations

from tradeoff.audit.auditor import Auditor
from tradeoff.audit.registry import check
from tradeoff.audit.verdicts import accuracy, compare, finding, pct, worst


@check("protocol", group="protocol")
def protocol(audit: Auditor) -> dict:
    s = audit.settings
    title = "The authors' protocol beside the strong attacks"
    if not audit.protocol:
        return finding("protocol", title, "", "", "skip", "no authors' protocol for this model's tables")
    pairs, verdicts = [], []
    for strong_label, strong_spec, code_label, code_spec in audit.protocol:
        strong = audit.measure(f"protocol {strong_label}", strong_spec)
        code = audit.measure(f"protocol {code_label}", code_spec)
        verdict, stats = compare(code, strong, s.tolerance, s.significance)
        verdicts.append(verdict)
        pairs.append({"strong": strong_label, "protocol": code_label, "strong_accuracy": accuracy(strong),
                      "protocol_accuracy": accuracy(code), "verdict": verdict, **stats})
    verdict = worst(verdicts)
    shown = sorted(pairs, key=lambda p: -p["gap"])
    over = [p for p in shown if p["verdict"] != "pass"]
    return finding("protocol", title,
                   f"the authors' attack may not leave robust accuracy higher than the strong attack it stands in "
                   f"for by more than {pct(s.tolerance)} (it overstates robustness)",
                   "Carlini et al. 2019, Sec. 3 (state the threat model, use strong attacks); Tramer et al. 2020",
                   verdict, "; ".join(f"{p['protocol']} {pct(p['protocol_accuracy'])} vs {p['strong']} "
                                      f"{pct(p['strong_accuracy'])}" for p in shown[:4])
                   + (f"; {len(shown) - 4} more pairs" if len(shown) > 4 else ""),
                   "report the strong attack's number, not the authors' protocol's: "
                   + ", ".join(f"{p['strong']} for {p['protocol']}" for p in over[:3]), pairs=pairs)
