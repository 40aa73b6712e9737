"""The papers' tables and figures, the summary and the claims' verdicts, built from result files only (metrics,
predictions, curves, analyses; never a checkpoint): ``build`` decides what a target writes, ``tables`` (a table's
cells in ``table_model``, its notes in ``table_notes``, its formats in ``table_render``) and ``figures`` (with the
``fig_*`` kinds) draw it, ``records`` vouches for every file read, ``stats`` and ``claims`` judge, ``summary`` says
what the build can and cannot say, ``robustbench`` exports RobustBench's entries and ``readme_excerpt`` the README's
excerpt.

May import: core, storage, models (the zoos' names only), config.
"""
