# One training job per distinct run (runs with identical resolved settings share one job). A job that is
# killed and started again resumes from its newest intact epoch state under results/work/{run}/. An adapter run
# also reads its pretrained backbone (`pretrained:` in the config).
# runtime.evaluate_with_training (the small scales): a run that targets evaluate is trained and evaluated by one
# job, rule train_evaluate_<run> below, whose outputs are both the training's and the evaluation's files.
TRAIN_EVAL = ({run: CATALOG.run_attacks(run) for run in TRAIN_IDS if CATALOG.run_attacks(run)}
              if CATALOG.evaluate_with_training else {})


def _train_resources():
    return dict(
        gpu=resource("train", "gpu", 1),
        runtime=lambda wc, attempt: resource("train", "runtime", 1440) * attempt,
        mem_mb=resource("train", "mem_mb", 32000),
        cpus_per_task=resource("train", "cpus_per_task", 4),
    )


rule train:
    input:
        dataset_ready,
        pretrained=pretrained_input,
    output:
        model=str(LAYOUT.model("{run}")),
        curves=str(LAYOUT.curves("{run}")),
    params:
        spec=run_spec_json,
    log:
        str(LAYOUT.log("train", "{run}")),
    wildcard_constraints:
        run=_alternatives(sorted(set(TRAIN_IDS) - set(TRAIN_EVAL))) or NO_MATCH,
    resources:
        **_train_resources(),
    shell:
        job_shell("{CONFIG_ARGS} train --run {wildcards.run}")


for _run, _rule in _rule_names("train_evaluate_", TRAIN_EVAL).items():
    _attacks, _wc = TRAIN_EVAL[_run], SimpleNamespace(run=_run)

    rule:
        name:
            _rule
        input:
            dataset_ready(_wc),
            pretrained=pretrained_input(_wc),
            data=evaluation_ready_markers(CATALOG, _run, _attacks),
        output:
            model=str(LAYOUT.model(_run)),
            curves=str(LAYOUT.curves(_run)),
            metrics=[str(LAYOUT.metrics(_run, a)) for a in _attacks],
            predictions=[str(LAYOUT.predictions(_run, a)) for a in _attacks],
        params:
            run=shlex.quote(_run),
            # a change of the run's settings or of an attack's re-runs the job (Snakemake's params rerun trigger);
            # a finished training is resumed from its last epoch state, not repeated
            spec=run_spec_json(_wc),
            attacks=json.dumps({a: CATALOG.attack_for(a, _run) for a in _attacks}, sort_keys=True),
        log:
            str(LAYOUT.log("train", _run)),
        resources:
            **_train_resources(),
        shell:
            job_shell("{CONFIG_ARGS} train --run {params.run} --evaluate")
