# One training job per distinct run (runs with identical resolved settings share one job). A job that is
# killed and started again resumes from its newest intact epoch state under results/work/{run}/.
rule train:
    input:
        dataset_ready,
    output:
        model=str(RESULTS / "checkpoints" / "{run}" / "model.pt"),
        curves=str(RESULTS / "curves" / "{run}.csv"),
    params:
        spec=run_spec_json,
    log:
        str(RESULTS / "logs" / "train" / "{run}.log"),
    resources:
        gpu=resource("train", "gpu", 1),
        runtime=lambda wc, attempt: resource("train", "runtime", 1440) * attempt,
        mem_mb=resource("train", "mem_mb", 32000),
        cpus_per_task=resource("train", "cpus_per_task", 4),
    shell:
        "tradeoff {CONFIG_ARGS} train --run {wildcards.run} > {log} 2>&1"
