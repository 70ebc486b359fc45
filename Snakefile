# attnio: why attention is hard to optimize — the whole study as one workflow.
#   snakemake --cores all                                      (default study, config/config.yaml)
#   snakemake --cores all --configfile config/presets/ci.yaml  (a preset on top of it)
from snakemake.utils import min_version, validate

min_version("9.0")


include: "workflow/rules/quoted_python.smk"
include: "workflow/rules/config_file.smk"


configfile: checked_config_file("config/config.yaml")


# a value off the schema: one line naming where it sits (a grid by its index) and what is allowed
if off_schema := schema_refusal(config):
    raise WorkflowError(off_schema)
validate(config, "workflow/schemas/config.schema.yaml")


# In the order data flows: the plan (common), the jobs' warm workers, the rules from the
# machine's provenance to the reports, the study's leaves (damage), then the run's end.
include: "workflow/rules/common.smk"
include: "workflow/rules/workers.smk"
include: "workflow/rules/env.smk"
include: "workflow/rules/build.smk"
include: "workflow/rules/preflight.smk"
include: "workflow/rules/validate.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/collect.smk"
include: "workflow/rules/stage_predict.smk"
include: "workflow/rules/pages.smk"
include: "workflow/rules/failed_pages.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/budget.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/damage.smk"
include: "workflow/rules/stale_index.smk"
include: "workflow/rules/run_summary.smk"
include: "workflow/rules/log_filter.smk"


onstart:
    start_workers()


onsuccess:
    end_workers()
    print_run_summary()


onerror:
    end_workers()
    print_run_summary(failed=True)


# Every file the study keeps (leaves() in workflow/rules/damage.smk: records, verdicts, build
# results, ceilings, provenance, tables, reports, the index), so that a deleted or damaged one
# is made again; damage is looked for as the DAG is built, and only a real run sets it aside.
rule all:
    default_target: True
    input:
        study_targets,
