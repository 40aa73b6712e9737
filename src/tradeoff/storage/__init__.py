"""Where results live and how they are written: the results layout (``layout``), atomic writes (``atomic``),
checkpoints (``checkpoint``), provenance (``provenance``) and the training curves logged with dvclive (``curves``).

May import: core.
"""
