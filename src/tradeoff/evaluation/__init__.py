"""Evaluating a model: loading it, one function for a catalog run, an external checkpoint and a user's model file
(``load.load_model``; each kind read in its own module: ``trained``, ``external``, ``user_model``), planning an evaluation's batches (``plan``), running the attacks in fp32 and eval mode
and writing metrics and predictions (``evaluate``), and measuring a method's learners one by one
(``learner_probes``).

May import: core, storage, data, models, attacks, config.
"""
