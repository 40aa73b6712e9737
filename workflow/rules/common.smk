# Validate the configuration before anything else, resolve the catalog, and hold the input functions. Every path
# comes from tradeoff.storage.layout (through the catalog's layout), every job's inputs from the same library functions
# that write DVC's stages (tradeoff.pipeline.dvc_export), so the two pipelines have the same jobs.
import json
import os
import re
import shlex
import sys

try:
    from tradeoff import config as tcfg
except ImportError as exc:  # the Python that runs Snakemake runs every job (job_shell): it must have the package
    print(f"tradeoff: cannot start any job: the Python that runs Snakemake ({sys.executable}) cannot import tradeoff "
          f"({exc}); run the checkout's own .venv/bin/snakemake (`make install` makes it), or install the package "
          "into this environment (pip install -e .)", file=sys.stderr)
    sys.exit(1)
from tradeoff.cli import configuration_error, unknown_target
from tradeoff.cli.commands.check_config import checked_catalog
from tradeoff.config.design import expand
from tradeoff.pipeline.costs import JobSizes
from tradeoff.report.build import target_caption, target_inputs, target_outputs
from tradeoff.report.claims import claims_file
from tradeoff.storage.layout import ready_marker


def refuse(exc):
    """A bad configuration: the one line of `tradeoff check-config` and its exit status, 2, before any job (not
    Snakemake's traceback of the Snakefile)."""
    print(configuration_error(exc), file=sys.stderr)
    sys.exit(2)


# The effective config is config/config.yaml overlaid by each --configfile, in order (named as the command line
# names them, relative to the workflow's folder, so that a message names them alike). Jobs re-read exactly
# these files through the CLI, so values given with --config key=value (which jobs would not see) are refused.
CONFIG_FILES = ["config/config.yaml"] + [os.path.relpath(f) if os.path.abspath(f).startswith(os.getcwd() + os.sep)
                                         else str(f) for f in workflow.config_settings.configfiles]
OVERRIDE_HELP = ("--config key=value overrides are not supported (jobs read the config files); put the values in a "
                 "YAML overlay (e.g. config/mine.yaml) and pass it with --configfile config/mine.yaml")
if workflow.config_settings.config:
    refuse(tcfg.ConfigError(f"{OVERRIDE_HELP} (given: --config "
                            + " ".join(f"{k}=..." for k in workflow.config_settings.config) + ")"))
try:
    # The checks of `tradeoff check-config` (the schema, on the catalog as expanded run by run, then every name,
    # range and file; the claims), and nothing else: one validator, one line. The catalog is resolved afresh, or
    # read from the cache that the jobs of an earlier call kept of the same files and code (this process only reads
    # it, so that a dry run writes nothing).
    CATALOG = checked_catalog(CONFIG_FILES)
    if CATALOG.config != expand(config):  # the files as written (compact) -> run by run, as load_catalog
        raise tcfg.ConfigError(OVERRIDE_HELP)
except tcfg.ConfigError as exc:
    refuse(exc)

# Every job reads these files (the CLI's default, $TRADEOFF_CONFIG, exported by every job's shell before its
# command), and runs under this Python ($TRADEOFF_PYTHON: job_shell). Neither is a param or part of a rule's command,
# which Snakemake compares between runs: which overlay files hold the settings is not a setting, another checkout's
# interpreter no change of code; a job reruns only when its own resolved settings change (`params: settings`).
JOB_PREFIX = (f"set -euo pipefail; export TRADEOFF_CONFIG={shlex.quote(os.pathsep.join(CONFIG_FILES))}; "
              f"TRADEOFF_PYTHON={shlex.quote(sys.executable)}; ")
shell.prefix(JOB_PREFIX)
LAYOUT = CATALOG.layout
CLAIMS = [str(p) for p in [claims_file(CATALOG)] if p.exists()]  # the papers' claims, checked by the summary
RES = config.get("resources", {})
try:
    # what each job costs (tradeoff.pipeline.costs: pass counts x a committed FLOP table, no PyTorch) and asks a cluster for
    SIZES = JobSizes(CATALOG, bench_folder=LAYOUT.bench)
except tcfg.ConfigError as exc:
    refuse(exc)
TRAIN_IDS = sorted(CATALOG.training_runs())
MODEL_IDS = CATALOG.evaluated_models()  # the training jobs and the external models (`external:`): both evaluated
EVALUATED = {run: CATALOG.eval_units(run) for run in MODEL_IDS}
SHARDED = sorted({u for units in EVALUATED.values() for u in units if CATALOG.shards_for(u) > 1})
UNSHARDED = sorted({u for units in EVALUATED.values() for u in units if CATALOG.shards_for(u) == 1})
TARGETS = {kind: [t for t, spec in CATALOG.targets.items() if spec.kind == kind] for kind in
           ("table", "figure", "group")}
# tables, and groups that hold a table, write a table's four files; groups of figures only a list (md, html)
TABLE_FILES = TARGETS["table"] + [g for g in TARGETS["group"] if CATALOG.table_targets(g)]
LIST_FILES = [g for g in TARGETS["group"] if not CATALOG.table_targets(g)]


def alternatives(names):
    """A wildcard constraint matching exactly these names (nothing for none)."""
    return "|".join(re.escape(n) for n in names) or "(?!x)x"


wildcard_constraints:
    run=alternatives(TRAIN_IDS),
    dataset=alternatives(CATALOG.datasets()),


def job_shell(args):
    """A job's shell command: ``tradeoff <args>``, run by the Python that runs this Snakemake (``python -m
    tradeoff.cli``; $TRADEOFF_PYTHON, set by every job's shell: JOB_PREFIX), so `.venv/bin/snakemake` needs no
    environment on PATH, on a login node or a SLURM node (whose Snakemake runs under the same interpreter). A job
    that cannot start says so in Snakemake's own output, not only in its log: the check before ``exec``. (Snakemake
    removes a job's old outputs before its shell starts: that this interpreter imports tradeoff was checked when it
    read this Snakefile, before any job.)

    Its output goes to the job's log. Snakemake deletes a job's `log:` file whenever it starts the job (again: after a
    kill, a requeue, a resubmission by `retries`), so `--log` makes tradeoff also append everything it writes to the
    log's history (`<name>.history.log`), after a header line per start: the lines before a resume are kept there.
    `exec` makes tradeoff the job's process itself, so the signals SLURM sends a job (SIGTERM at a time limit, a
    preemption, or the profile's early --signal) reach it: training then saves the step it reached."""
    return ('test -x "$TRADEOFF_PYTHON" || {{ echo "tradeoff: cannot start the job: no Python at $TRADEOFF_PYTHON '
            '(the one that runs Snakemake)" >&2; exit 127; }}; '
            f'exec "$TRADEOFF_PYTHON" -m tradeoff.cli --log {{log}} {args} > {{log}} 2>&1')


def resource(stage, key, default):
    return RES.get(stage, {}).get(key, default)


def job_resources(stage, minutes, mem_mb):
    """What a job asks the scheduler for (config `resources.<stage>`): its runtime is `minutes(wildcards)`, the job's
    planned time x resources.plan.safety (tradeoff.pipeline.costs.JobSizes; the stage's fixed `runtime` without a plan), and a
    resubmitted job (`retries`) asks for `attempt` times that."""
    return dict(
        gpu=resource(stage, "gpu", 1),
        runtime=lambda wc, attempt: minutes(wc) * attempt,
        mem_mb=resource(stage, "mem_mb", mem_mb),
        cpus_per_task=resource(stage, "cpus_per_task", 4),
    )


# A run's cheap evaluations (planned under resources.plan.group_minutes each) go to a cluster as one job: the evaluate
# rule puts them in the group `evaluate-<run>` (SIZES.eval_group). They do not depend on each other, so each is a
# connected component of its own; the SLURM profile's `group-components: [evaluate=1000]` joins them, which Snakemake
# looks up under the group's parent id, registered here. Snakemake runs a group's jobs one after the other on its one
# GPU (the profile's `resources: [gpu=1]`, a `local` resource: the limit of each submitted job, not of the whole run),
# and it asks for the sum of their runtimes. Groups apply to cluster execution only; a local run ignores them.
resource_scopes:
    gpu="local",


for _run in MODEL_IDS:
    workflow.parent_groupids[f"evaluate-{_run}"] = "evaluate"


def evaluation_group(wildcards):
    return SIZES.eval_group(wildcards.run, wildcards.unit)


def warn_placeholder_account():
    """The SLURM profile ships `slurm_account: CHANGE-ME`: say so at once (a dry run too), not after sbatch refuses."""
    defaults = workflow.resource_settings.default_resources
    account = None
    if defaults is not None:
        parsed = getattr(defaults, "parsed", defaults)
        account = parsed.get("slurm_account") if hasattr(parsed, "get") else None
        account = getattr(account, "raw", account)  # the text as given (a default resource is an expression)
    if account is not None and str(account).strip("'\"") == "CHANGE-ME":
        print("WARNING: slurm_account is still the placeholder 'CHANGE-ME' (workflow/profiles/slurm/config.yaml, "
              "default-resources): set it to your SLURM account (`sacctmgr -n -s list user $USER format=account`), "
              "or every sbatch will be refused", file=sys.stderr)


if workflow.is_main_process:
    warn_placeholder_account()


def requested_targets():
    """The targets named on this Snakemake's command line (read from it with Snakemake's own parser: the Snakefile is
    read before Snakemake holds them); none when it was not started from a command line (the API)."""
    from snakemake.cli import get_argument_parser

    if not os.path.basename(sys.argv[0]).startswith("snakemake") and not sys.argv[0].endswith("snakemake/__main__.py"):
        return []
    try:
        args, _ = get_argument_parser().parse_known_args(sys.argv[1:])
    except SystemExit:  # Snakemake's own parser reports its errors itself
        return []
    return list(getattr(args, "targets", None) or [])


def check_requested_targets():
    """A target that names no rule (a catalog target, an audit target, ...) and no path gets the one line naming it
    with the closest names, exit status 2, as `tradeoff plan tabel1a` says it (not Snakemake's MissingRuleException).
    Called at the end of the Snakefile, when every rule is defined; files (a path) are Snakemake's to find."""
    rules = {r.name for r in workflow.rules}
    for name in requested_targets():
        if name in rules or "/" in name or os.path.exists(name):
            continue
        refuse(tcfg.ConfigError(unknown_target(name, [*CATALOG.targets, *AUDIT_TARGETS])))


# ------------------------------------------------------------------------------------------- input functions


def dataset_ready(wildcards):
    return str(ready_marker(CATALOG.data_root, CATALOG.runs[wildcards.run].dataset))


def pretrained_input(wildcards):
    """An adapter run's backbone checkpoint (`pretrained.<arch>`): a file the training job reads, so a run of the
    pipeline that writes it (the demo's pretraining) comes first. Unset, it stops the DAG naming the key, but only
    when a requested target trains such a run."""
    try:
        path = CATALOG.pretrained_checkpoint(wildcards.run)
    except tcfg.ConfigError as exc:
        refuse(exc)
    return [] if path is None else [str(path)]


def run_settings(wildcards):
    """A run's resolved settings: a change re-runs its training (Snakemake's params rerun trigger)."""
    return json.dumps(CATALOG.runs[wildcards.run].as_dict(), sort_keys=True)


def unit_data(wildcards):
    """The download markers an evaluation job reads besides its run's test set (an NROB's corruption dataset)."""
    return CATALOG.evaluation_markers(wildcards.run, CATALOG.unit_attacks(wildcards.run, wildcards.unit))


def unit_settings(wildcards):
    """The resolved settings of every attack of an evaluation job (and of an external model, how its file is read):
    a change re-runs it."""
    attacks = {a: CATALOG.attack_for(a, wildcards.run).as_dict()
               for a in CATALOG.unit_attacks(wildcards.run, wildcards.unit)}
    if CATALOG.is_external(wildcards.run):
        return json.dumps({"external": CATALOG.externals[wildcards.run].as_dict(), "attacks": attacks},
                          sort_keys=True)
    return json.dumps(attacks, sort_keys=True)


def model_input(wildcards):
    """The model an evaluation job reads: a training job's model.pt, or an external model's checkpoint file (and its
    dataset, which no training job downloads first)."""
    return CATALOG.evaluation_inputs(wildcards.run)


def shard_inputs(wildcards):
    n = CATALOG.shards_for(wildcards.unit)
    return [str(LAYOUT.eval_work(wildcards.run, wildcards.unit, (k, n), ".json")) for k in range(n)]


def analysis_inputs(wildcards):
    """An analysis job reads the checkpoints of its figure's runs and the datasets they need."""
    return [str(LAYOUT.model(r)) for r in CATALOG.analysis_train_ids(wildcards.target)] + [
        str(ready_marker(CATALOG.data_root, d)) for d in CATALOG.analysis_datasets(wildcards.target)]


def analysis_settings(wildcards):
    return json.dumps(CATALOG.targets[wildcards.target].analysis.as_dict(), sort_keys=True)


def report_inputs(wildcards):
    return [str(p) for p in target_inputs(CATALOG, wildcards.target)]


def report_settings(wildcards):
    """A target's settings as its report job sees them (a group's with its members'): a change re-runs that report
    job alone (Snakemake's params rerun trigger), e.g. a new title, rows, labels or plot options."""
    return json.dumps(CATALOG.report_settings(wildcards.target), sort_keys=True)


def report_caption(wildcards):
    """What the Snakemake report says under a target (workflow/report/target.rst)."""
    return target_caption(CATALOG, wildcards.target)


def all_target_outputs():
    return [str(p) for name in CATALOG.targets for p in target_outputs(CATALOG, name)]
