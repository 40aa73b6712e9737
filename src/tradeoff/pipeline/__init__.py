"""The pipeline around the jobs: an evaluation job planned from the catalog (``evaluation_jobs``), what each job
costs and the cost plan (``costs``), DVC's stages (``dvc_export``), and the measurements the plan rests on: step
timings (``bench``, ``bench_eval``) and the GPU node check (``gpucheck``, with ``flops.json``, the committed table of
pass FLOPs).

May import: every package but cli.
"""
