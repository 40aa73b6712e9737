"""Evaluating a model: loading it, one function for a catalog run, an external checkpoint and a user's model file
(``load.load_model``; each kind read in its own module: ``trained``, ``external``, ``user_model``), running the
attacks in fp32 and eval mode and writing metrics and predictions (``evaluate``), and measuring a method's learners
one by one (``learner_probes``).

Never the catalog (tradeoff.config): an evaluation takes a model's source, its jobs' attack specs and paths;
tradeoff.pipeline.evaluation_jobs plans it from the catalog.

May import: core, storage, data, models, attacks.
"""
