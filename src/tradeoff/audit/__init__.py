"""The audit of a robustness evaluation: one command that says whether a model's evaluation can be trusted.

A battery of sanity checks from the literature on evaluating defences (Carlini et al. 2019, "On Evaluating
Adversarial Robustness"; Athalye et al. 2018, "Obfuscated Gradients Give a False Sense of Security"; Croce & Hein 2020,
AutoAttack; Tramer et al. 2020, "On Adaptive Attacks to Adversarial Example Defenses"), each with a stated pass rule
and a verdict (pass / warn / fail) with the numbers behind it, written as one page per model under
``results/<scale>/audit/`` (docs/audit.md lists every check, its rule and its source):

- :mod:`.checks`: the checks themselves, on a model and a batch of test examples (PyTorch);
- :mod:`.page`: the page (Markdown, HTML, one figure in PNG and PDF) from an audit's record;
- :mod:`.run`: an audit of a run or of an external checkpoint of the catalog, from its settings (``audit:``).

The summary reads a written audit's verdicts with ``tradeoff.report.records.failed_checks`` (no PyTorch, and the
report imports nothing of the audit).
"""
