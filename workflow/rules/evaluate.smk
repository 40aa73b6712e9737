# Evaluation jobs: one per (run, attack), and per budget for a budget sweep (an attack whose eps is a list is
# named <attack>@<label>, e.g. pgd@16_255; its files are metrics/<run>/pgd@16_255.json). Always fp32, eval mode,
# a fixed seed. A killed job resumes from its state file, results/work/eval/<run>/<attack>[.shard-K-of-N].state.
#
# Sharding: an attack with N > 1 shards (its `shards`, else runtime.eval_shards) is N jobs, one GPU each, every
# one on a contiguous run of whole batches of the global batch grid (so each batch keeps its seed); a local job
# merges them (`tradeoff merge-shards`) into exactly the files, and the numbers, of one unsharded job.
#
# runtime.eval_per_run (the demo and smoke scales): one job per training run instead, rule
# evaluate_run_<run> (the run id with every character other than a letter, digit or _ as _), which
# evaluates all the attacks that the targets need of that run in one process (`tradeoff evaluate --run R
# --attack A1 --attack A2 ...`): the same files, the same numbers, one process start-up. The generic rule
# then matches nothing; sharding is refused with it (tradeoff.config).
#
# NROB (an entry of type `corruptions`, e.g. attacks.nrob) is evaluated like an attack, never sharded; its job also
# reads the corruption dataset (Tiny-ImageNet-C, or digits-c at the smaller scales), whose download marker it needs.

EVAL_JOBS = CATALOG.attack_jobs()
SHARDED = [a for a in EVAL_JOBS if CATALOG.shards_for(a) > 1]
UNSHARDED = [a for a in EVAL_JOBS if CATALOG.shards_for(a) == 1]
EVAL_PER_RUN = CATALOG.eval_per_run


def _eval_resources():
    return dict(
        gpu=resource("evaluate", "gpu", 1),
        runtime=lambda wc, attempt: resource("evaluate", "runtime", 240) * attempt,
        mem_mb=resource("evaluate", "mem_mb", 16000),
        cpus_per_task=resource("evaluate", "cpus_per_task", 4),
    )


def shard_inputs(wildcards):
    n = CATALOG.shards_for(wildcards.attack)
    return [str(LAYOUT.eval_work(wildcards.run, wildcards.attack, (k, n), ".json")) for k in range(n)]


rule evaluate:
    input:
        model=str(LAYOUT.model("{run}")),
        data=lambda wc: evaluation_ready_markers(CATALOG, wc.run, [wc.attack]),
    output:
        metrics=str(LAYOUT.metrics("{run}", "{attack}")),
        predictions=str(LAYOUT.predictions("{run}", "{attack}")),
    params:
        spec=attack_spec_json,
    log:
        str(LAYOUT.log("evaluate", "{run}", "{attack}")),
    wildcard_constraints:
        attack=NO_MATCH if EVAL_PER_RUN else (_alternatives(UNSHARDED) or NO_MATCH),
    resources:
        **_eval_resources(),
    shell:
        job_shell("{CONFIG_ARGS} evaluate --run {wildcards.run} --attack {wildcards.attack}")


# (runtime.evaluate_with_training: the runs' training jobs evaluate them instead, workflow/rules/train.smk)
EVAL_RUNS = {run: CATALOG.run_attacks(run) for run in TRAIN_IDS if run not in TRAIN_EVAL} if EVAL_PER_RUN else {}
for _run, _rule in _rule_names("evaluate_run_", [r for r, attacks in EVAL_RUNS.items() if attacks]).items():
    _attacks = EVAL_RUNS[_run]

    rule:
        name:
            _rule
        input:
            model=str(LAYOUT.model(_run)),
            data=evaluation_ready_markers(CATALOG, _run, _attacks),
        output:
            metrics=[str(LAYOUT.metrics(_run, a)) for a in _attacks],
            predictions=[str(LAYOUT.predictions(_run, a)) for a in _attacks],
        params:
            run=shlex.quote(_run),
            attacks=" ".join(f"--attack {shlex.quote(a)}" for a in _attacks),
            # every attack's resolved settings: a change re-runs the job (Snakemake's params rerun trigger)
            spec=json.dumps({a: CATALOG.attack_for(a, _run) for a in _attacks}, sort_keys=True),
        log:
            str(LAYOUT.log("evaluate", _run)),
        resources:
            **_eval_resources(),
        shell:
            job_shell("{CONFIG_ARGS} evaluate --run {params.run} {params.attacks}")


rule evaluate_shard:
    input:
        model=str(LAYOUT.model("{run}")),
    output:
        str(LAYOUT.eval_work("{run}", "{attack}", ("{shard}", "{shards}"), ".json")),
    params:
        spec=attack_spec_json,
    log:
        str(LAYOUT.log("evaluate", "{run}", "{attack}.shard-{shard}-of-{shards}")),
    wildcard_constraints:
        attack=_alternatives(SHARDED) or NO_MATCH,
        shard=r"\d+",
        shards=r"\d+",
    resources:
        **_eval_resources(),
    shell:
        job_shell("{CONFIG_ARGS} evaluate --run {wildcards.run} --attack {wildcards.attack} "
                  "--shard {wildcards.shard} --shards {wildcards.shards}")


rule merge_shards:
    input:
        shard_inputs,
    output:
        metrics=str(LAYOUT.metrics("{run}", "{attack}")),
        predictions=str(LAYOUT.predictions("{run}", "{attack}")),
    params:
        shards=lambda wc: CATALOG.shards_for(wc.attack),
    log:
        str(LAYOUT.log("evaluate", "{run}", "{attack}.merge")),
    wildcard_constraints:
        attack=_alternatives(SHARDED) or NO_MATCH,
    localrule: True
    shell:
        job_shell("{CONFIG_ARGS} merge-shards --run {wildcards.run} --attack {wildcards.attack} "
                  "--shards {params.shards}")
