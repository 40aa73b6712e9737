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
        log:
            str(RESULTS / "logs" / "report" / f"{_name}.log"),
        localrule: True
        shell:
            "tradeoff {CONFIG_ARGS} report {params.target} > {log} 2>&1"


rule summary:
    input:
        all_target_outputs(),
    output:
        report(str(summary_paths(CATALOG)["html"]), category="summary"),
        str(summary_paths(CATALOG)["md"]),
    log:
        str(RESULTS / "logs" / "report" / "summary.log"),
    localrule: True
    shell:
        "tradeoff {CONFIG_ARGS} summary > {log} 2>&1"
