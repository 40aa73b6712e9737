# Evaluation jobs, always fp32, eval mode, fixed seeds. A job is a `unit` of a run (runtime.eval_unit): one attack
# (`attack`, the paper scale: its files are metrics/<run>/<attack>.json, a budget sweep's budget named
# <attack>@<label>, e.g. caat_pgd@16_255) or every attack the targets need of the run in one process (`run`, the
# small scales, where a job's start-up costs more than its work: metrics/<run>/all.json). The same numbers either
# way. A killed job resumes from its state files under results/<scale>/work/eval/<run>/.
#
# Sharding (an attack's `shards`, or runtime.eval_shards; with eval_unit: attack): N jobs of one evaluation, one GPU
# each, every one on a contiguous run of whole batches of the global batch grid (so each batch keeps its seed); a
# local job merges them into exactly the files, and the numbers, of one unsharded job.
#
# An external model (the config's `external:`, a model this pipeline did not train) is evaluated by the same rules
# into the same files as a training job's model: `{run}` is its id, its input its checkpoint file and its dataset.


rule evaluate:
    input:
        model=model_input,
        data=unit_data,
    output:
        metrics=str(LAYOUT.metrics("{run}", "{unit}")),
        predictions=str(LAYOUT.predictions("{run}", "{unit}")),
    params:
        settings=unit_settings,
    log:
        str(LAYOUT.log("evaluate", "{run}", "{unit}")),
    wildcard_constraints:
        run=alternatives(MODEL_IDS),
        unit=alternatives(UNSHARDED),
    group:
        evaluation_group
    resources:
        **job_resources("evaluate", lambda wc: SIZES.eval_minutes(wc.run, wc.unit), 16000),
    shell:
        job_shell("evaluate --run {wildcards.run} --unit {wildcards.unit}")


rule evaluate_shard:
    input:
        model=model_input,
    output:
        str(LAYOUT.eval_work("{run}", "{unit}", ("{shard}", "{shards}"), ".json")),
    params:
        settings=unit_settings,
    log:
        str(LAYOUT.log("evaluate", "{run}", "{unit}.shard-{shard}-of-{shards}")),
    wildcard_constraints:
        run=alternatives(MODEL_IDS),
        unit=alternatives(SHARDED),
        shard=r"\d+",
        shards=r"\d+",
    resources:
        **job_resources("evaluate", lambda wc: SIZES.shard_minutes(wc.run, wc.unit, int(wc.shards)), 16000),
    shell:
        job_shell("evaluate --run {wildcards.run} --attack {wildcards.unit} --shard {wildcards.shard} "
                  "--shards {wildcards.shards}")


rule merge_shards:
    input:
        shard_inputs,
    output:
        metrics=str(LAYOUT.metrics("{run}", "{unit}")),
        predictions=str(LAYOUT.predictions("{run}", "{unit}")),
    params:
        shards=lambda wc: CATALOG.shards_for(wc.unit),
    log:
        str(LAYOUT.log("evaluate", "{run}", "{unit}.merge")),
    wildcard_constraints:
        run=alternatives(MODEL_IDS),
        unit=alternatives(SHARDED),
    localrule: True
    shell:
        job_shell("merge-shards --run {wildcards.run} --attack {wildcards.unit} --shards {params.shards}")
