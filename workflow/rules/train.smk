# One training job per distinct run (runs with identical resolved settings share one job). A job that is killed,
# preempted or signalled resumes from its newest intact state under results/<scale>/work/<run>/ (an epoch's, or the
# step a signal stopped it at). An adapter run also reads its pretrained backbone (`pretrained:` in the config).


rule train:
    input:
        dataset_ready,
        pretrained=pretrained_input,
    output:
        model=str(LAYOUT.model("{run}")),
        curves=directory(str(LAYOUT.curves("{run}"))),
    params:
        settings=run_settings,
    log:
        str(LAYOUT.log("train", "{run}")),
    resources:
        **job_resources("train", lambda wc: SIZES.train_minutes(wc.run), 32000),
    shell:
        job_shell("train --run {wildcards.run}")
