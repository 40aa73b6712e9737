# One rule per target of the catalog, named as the target (`snakemake table1a`). Tables read metrics only.
for _name in CATALOG.targets:

    rule:
        name:
            _name
        input:
            target_inputs(_name),
        output:
            target_outputs(_name),
        params:
            target=_name,
        log:
            str(RESULTS / "logs" / "report" / f"{_name}.log"),
        localrule: True
        shell:
            "tradeoff {CONFIG_ARGS} table {params.target} > {log} 2>&1"
