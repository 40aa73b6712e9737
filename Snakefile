# tradeoff: the accuracy-robustness trade-off papers as a build.
#   snakemake --cores 2 --configfile config/demo.yaml        every target at the demo scale
#   snakemake --profile slurm table1                          Table 1 at paper scale on a SLURM cluster
# The DAG comes from the catalog in config/ (validated first, in workflow/rules/common.smk).
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"


report: "workflow/report/workflow.rst"


rule all:
    default_target: True
    input:
        all_target_outputs(),
        str(LAYOUT.summary()["md"]),


include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/audit.smk"


check_requested_targets()  # a misspelt target: one line with the closest names (workflow/rules/common.smk)
