# One rule per target of the catalog, named as the target (`snakemake table1a`). Reports read metrics,
# predictions and curves only, never checkpoints.
for _name in CATALOG.targets:

    rule:
        name:
            _name
        input:
            target_inputs(_name),
        output:
            [report(p, category=CATALOG.targets[_name]["kind"]) if p.endswith((".png", ".html")) else p
             for p in target_outputs(_name)],
        params:
            target=_name,
            settings=target_settings(_name),
        log:
            str(LAYOUT.log("report", _name)),
        localrule: True
        shell:
            "tradeoff {CONFIG_ARGS} report {params.target} > {log} 2>&1"


rule summary:
    input:
        all_target_outputs(),
    output:
        report(str(LAYOUT.summary()["html"]), category="summary"),
        str(LAYOUT.summary()["md"]),
    log:
        str(LAYOUT.log("report", "summary")),
    localrule: True
    shell:
        "tradeoff {CONFIG_ARGS} summary > {log} 2>&1"


# Analysis jobs: a figure that needs more than accuracies (t-SNE, image grids, the CA-AT synthetic experiment)
# names an analysis; its job reads the checkpoints of the figure's runs and writes results/analysis/<target>.json,
# the only file the figure then reads.
ANALYSIS_TARGETS = CATALOG.analysis_targets()


def analysis_inputs(wildcards):
    runs = CATALOG.analysis_runs(wildcards.target)
    return [str(LAYOUT.model(r)) for r in runs] + [
        str(ready_marker(DATA, d)) for d in CATALOG.analysis_datasets(wildcards.target)]


rule analyze:
    input:
        analysis_inputs,
    output:
        str(LAYOUT.analysis("{target}")),
    params:
        spec=lambda wc: json.dumps(CATALOG.targets[wc.target]["analysis"], sort_keys=True),
    log:
        str(LAYOUT.log("analyze", "{target}")),
    wildcard_constraints:
        target=_alternatives(ANALYSIS_TARGETS) or NO_MATCH,
    resources:
        gpu=resource("evaluate", "gpu", 1),
        runtime=lambda wc, attempt: resource("evaluate", "runtime", 240) * attempt,
        mem_mb=resource("evaluate", "mem_mb", 16000),
        cpus_per_task=resource("evaluate", "cpus_per_task", 4),
    shell:
        "tradeoff {CONFIG_ARGS} analyze {wildcards.target} > {log} 2>&1"
