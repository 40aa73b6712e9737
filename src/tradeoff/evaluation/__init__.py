"""Evaluating a model: loading it, one function for a catalog run, an external checkpoint and a user's model file
(``load.load_model``; each kind read in its own module: ``trained``, ``external``, ``user_model``), the evaluation
jobs that run its attacks through the attack loop (tradeoff.attacks.loop) and write its metrics and predictions
(``evaluate``), their resume state (``state``), the record format (``records``), the bound each attack is checked
against (``bound``), and the shards of an evaluation and their merging (``shards``).

Never the catalog (tradeoff.config): an evaluation takes a model's source, its jobs' attack specs and paths;
tradeoff.pipeline.evaluation_jobs plans it from the catalog.

May import: core, storage, data, models, attacks.
"""
