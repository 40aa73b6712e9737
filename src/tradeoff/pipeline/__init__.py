"""The pipeline around the jobs: an evaluation job planned from the catalog (``evaluation_jobs``), what each job
costs and the cost plan (``costs``, with ``flops.json``, the committed table of pass FLOPs), DVC's stages
(``dvc_export``), and the measurements the plan rests on, in the subpackage ``bench``: FLOP counts, training step and
evaluation timings, and the GPU node check.

May import: every package but cli.
"""
