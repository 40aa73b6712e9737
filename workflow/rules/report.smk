# Reports: tables (Markdown, CSV, LaTeX, HTML), figures (PNG, PDF) and lists of a group's members, built from metrics,
# predictions, curves and analyses only, never checkpoints; a change of a target's settings re-runs its report. The
# rules that take a target's name (`snakemake table1a`) only name its files.

from tradeoff.report.build import claims_inputs


rule table:
    input:
        report_inputs,
    output:
        md=str(LAYOUT.tables("{target}")["md"]),
        csv=str(LAYOUT.tables("{target}")["csv"]),
        tex=str(LAYOUT.tables("{target}")["tex"]),
        html=report(str(LAYOUT.tables("{target}")["html"]), caption="../report/target.rst", category="tables"),
    params:
        settings=report_settings,
        caption=report_caption,
    log:
        str(LAYOUT.log("report", "{target}")),
    wildcard_constraints:
        target=alternatives(TABLE_FILES),
    localrule: True
    shell:
        job_shell("report {wildcards.target}")


rule figure:
    input:
        report_inputs,
    output:
        png=report(str(LAYOUT.figures("{target}")["png"]), caption="../report/target.rst", category="figures"),
        pdf=str(LAYOUT.figures("{target}")["pdf"]),
    params:
        settings=report_settings,
        caption=report_caption,
    log:
        str(LAYOUT.log("report", "{target}")),
    wildcard_constraints:
        target=alternatives(TARGETS["figure"]),
    localrule: True
    shell:
        job_shell("report {wildcards.target}")


rule figure_list:
    input:
        report_inputs,
    output:
        md=str(LAYOUT.tables("{target}")["md"]),
        html=str(LAYOUT.tables("{target}")["html"]),
    params:
        settings=report_settings,
    log:
        str(LAYOUT.log("report", "{target}")),
    wildcard_constraints:
        target=alternatives(LIST_FILES),
    localrule: True
    shell:
        job_shell("report {wildcards.target}")


# The claims' forest plot: each claim's effect with its 95% interval, by verdict (the summary embeds it).
rule claims:
    input:
        [str(p) for p in claims_inputs(CATALOG)],
    output:
        png=report(str(LAYOUT.claims_figure()["png"]), caption="../report/claims.rst", category="summary"),
        pdf=str(LAYOUT.claims_figure()["pdf"]),
    log:
        str(LAYOUT.log("report", "claims")),
    localrule: True
    shell:
        job_shell("report --claims")


rule summary:
    input:
        all_target_outputs(),
        CLAIMS,
        str(LAYOUT.claims_figure()["png"]),
    output:
        html=report(str(LAYOUT.summary()["html"]), caption="../report/summary.rst", category="summary"),
        md=str(LAYOUT.summary()["md"]),
        csv=str(LAYOUT.summary()["csv"]),
    log:
        str(LAYOUT.log("report", "summary")),
    localrule: True
    shell:
        job_shell("summary")


# Analysis jobs: a figure that needs more than accuracies (t-SNE, image grids, the CA-AT synthetic experiment)
# names an analysis; its job reads the checkpoints of the figure's runs and writes
# results/<scale>/analysis/<target>.json, the only file the figure then reads.
rule analyze:
    input:
        analysis_inputs,
    output:
        str(LAYOUT.analysis("{target}")),
    params:
        settings=analysis_settings,
    log:
        str(LAYOUT.log("analyze", "{target}")),
    wildcard_constraints:
        target=alternatives(CATALOG.analysis_targets()),
    resources:
        **job_resources("evaluate", lambda wc: SIZES.fixed["evaluate"], 16000),  # not priced: the stage's runtime
    shell:
        job_shell("analyze {wildcards.target}")


# `snakemake table1a`, `snakemake --profile slurm table1`: a rule per target name that only asks for its files
for _name in CATALOG.targets:

    rule:
        name:
            _name
        input:
            [str(p) for p in target_outputs(CATALOG, _name)],
        localrule: True
