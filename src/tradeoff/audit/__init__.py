"""The audit of a robustness evaluation: one command that says whether a model's evaluation can be trusted.

A battery of checks from the literature on evaluating defences (Carlini et al. 2019, "On Evaluating Adversarial
Robustness"; Athalye et al. 2018, "Obfuscated Gradients Give a False Sense of Security"; Croce & Hein 2020,
AutoAttack; Tramer et al. 2020, "On Adaptive Attacks to Adversarial Example Defenses"; Pintor et al. 2022,
"Indicators of Attack Failure"), each with a stated pass rule and a verdict (pass / warn / fail / n/a) with the
numbers behind it and a next step, in three groups with a verdict each (masking, convergence, protocol), the reported
columns audited against the best known robust accuracy, written as one page per model under
``results/<scale>/audit/`` (docs/audit.md lists every check, its rule and its source):

- :mod:`.registry`: the checks' registry (``@check(name, group=...)``) and the order the audit runs them in;
- :mod:`.verdicts`: a check's finding, the group verdicts and the overall line, the comparison of two attacks;
- :mod:`.auditor`: :class:`~.auditor.Auditor`, on a model and a batch of test examples (PyTorch): its measurements,
  and the runner of the registered checks;
- :mod:`.masking`, :mod:`.convergence`, :mod:`.protocol`: the checks of each verdict group, one function each
  (:mod:`.adaptive`: the masking group's adaptive attacks, BPDA and NES);
- :mod:`.page`: the page (Markdown, HTML, one figure in PNG and PDF) from an audit's record;
- :mod:`.run`: an audit of a run, an external checkpoint or a model from a Python file, from its settings
  (``audit:``, a :class:`~tradeoff.core.spec.AuditSpec`); :func:`~.run.make_record` for an auditor run from Python;
- :mod:`.jobs`: the audit as jobs of the pipeline (no PyTorch).

Nothing is imported here: import from the module (``from tradeoff.audit.auditor import Auditor``), so that
``tradeoff.audit.jobs`` stays free of PyTorch. The summary reads a written audit's verdicts with
``tradeoff.report.records.failed_checks`` (no PyTorch, and the report imports nothing of the audit).

May import: core, storage, data, models, attacks, config, evaluation, report.
"""
