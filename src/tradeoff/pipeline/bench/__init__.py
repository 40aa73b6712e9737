"""The measurements the cost plan rests on, and the GPU node check: what a bench runs on (``synthetic``: each
dataset's shape and sizes, a seeded synthetic batch, a run's method on a freshly built model), the FLOP counts and the
committed table of pass FLOPs (``flops``: `tradeoff bench-flops`, into ``tradeoff/pipeline/flops.json``), training
step timing (``train``: `tradeoff bench-train`), evaluation timing (``evaluate``: `tradeoff bench-eval`), CPU cost
ratios (``ratios``: `tradeoff bench-ratios`) and the GPU node check (``gpucheck``: `tradeoff gpu-check`, its sections
in order under a budget), whose sections are modules of their own (``check_imports`` and ``check_steps``: a,
``check_benches``: b and c, ``check_precision``: d, ``check_rehearsal``: e) as is its report (``check_report``).

This package imports nothing at its top: ``import tradeoff.pipeline.bench.flops`` loads that module only.

May import: every package but cli.
"""
