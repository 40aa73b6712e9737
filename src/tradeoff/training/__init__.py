"""Training one run of the catalog: the epoch loop, checkpointing and resuming, epoch selection on the validation
split, and the curves (``train``).

May import: core, storage, data, models, attacks, methods, config, evaluation.
"""
