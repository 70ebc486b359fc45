"""Thin entry point of rule budget: results/budget.json, the study's estimated duration on
this machine (kernels.estimate). An estimate that cannot be made is one line, in the log and
on the console: what failed and why (kernels.estimate.BudgetError)."""

import json

from kernels.estimate import BudgetError, main
from kernels.io.atomic import write_text_atomic
from kernels.io.script_log import logged_to

smk = snakemake  # noqa: F821 (injected by Snakemake)
failed = None
with logged_to(smk.log[0]):
    try:
        estimate = main(smk)
    except BudgetError as err:
        failed = f"error: the estimate failed: {err}"
        print(failed)
    else:
        print("\n".join(estimate["summary"]))
        print(json.dumps(estimate, indent=1))
        write_text_atomic(smk.output[0], json.dumps(estimate, indent=1) + "\n")
if failed:
    raise SystemExit(failed)
