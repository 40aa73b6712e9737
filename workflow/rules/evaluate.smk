# One evaluation job per (run, attack): always fp32, eval mode, a fixed seed.
rule evaluate:
    input:
        model=str(RESULTS / "checkpoints" / "{run}" / "model.pt"),
    output:
        metrics=str(metrics_path(RESULTS, "{run}", "{attack}")),
        predictions=str(predictions_path(RESULTS, "{run}", "{attack}")),
    params:
        spec=attack_spec_json,
    log:
        str(RESULTS / "logs" / "evaluate" / "{run}" / "{attack}.log"),
    resources:
        gpu=resource("evaluate", "gpu", 1),
        runtime=lambda wc, attempt: resource("evaluate", "runtime", 240) * attempt,
        mem_mb=resource("evaluate", "mem_mb", 16000),
        cpus_per_task=resource("evaluate", "cpus_per_task", 4),
    shell:
        "tradeoff {CONFIG_ARGS} evaluate --run {wildcards.run} --attack {wildcards.attack} > {log} 2>&1"
