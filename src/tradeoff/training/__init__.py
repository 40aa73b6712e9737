"""Training one run: the epoch loop, checkpointing and resuming, epoch selection on the validation
split, and the curves (``train``); a method's learners measured per epoch (``learner_probes``).

Never the catalog (tradeoff.config): training takes a run's spec and paths (`tradeoff train` reads them from the
catalog).

May import: core, storage, data, models, attacks, methods.
"""
