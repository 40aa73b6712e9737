# Audits (docs/audit.md): `tradeoff audit` of a model, the sanity checks of its evaluation on one page with their
# verdicts, results/<scale>/audit/<model>.{json,md,html,png,pdf}. `snakemake audit_<table>` (a table, or a group of
# tables) audits every row's model; the default target audits the rows of `audit.build`'s tables, whose tables read
# the audits (tradeoff.report.build.target_inputs). An audit reads the model's file and its transfer surrogate's
# (tradeoff.audit.jobs, which DVC's audit stages ask too) and the columns the tables report for the model (it runs
# after their evaluations); a change of its resolved settings re-runs it.
from tradeoff.audit import jobs as audit_jobs

AUDIT_TARGETS = audit_jobs.audit_targets(CATALOG)


rule audit:
    input:
        lambda wc: audit_jobs.job_inputs(CATALOG, wc.run),
        # the metrics and predictions of the columns the tables report for the model, which it audits
        lambda wc: CATALOG.reported_files(wc.run),
    output:
        **{ext: str(path) for ext, path in LAYOUT.audit("{run}").items()},
    params:
        settings=lambda wc: audit_jobs.job_settings(CATALOG, wc.run),
    log:
        str(LAYOUT.log("audit", "{run}")),
    wildcard_constraints:
        run=alternatives(MODEL_IDS),
    resources:
        **job_resources("evaluate", lambda wc: SIZES.audit_minutes(wc.run), 16000),
    shell:
        job_shell("audit --run {wildcards.run}")


# `snakemake audit_table1a`: a rule per table (and group of tables) that only asks for its rows' audit pages
for _name, _table in AUDIT_TARGETS.items():

    rule:
        name:
            _name
        input:
            [str(LAYOUT.audit(m)["md"]) for m in audit_jobs.audited_models(CATALOG, _table)],
        localrule: True
