"""Thin entry point of rule budget: results/budget.json, the study's estimated duration on
this machine (kernels.estimate)."""

import json

from kernels.estimate import BudgetError, main
from kernels.io.atomic import write_text_atomic
from kernels.io.script_log import logged_to

smk = snakemake  # noqa: F821 (injected by Snakemake)
try:
    with logged_to(smk.log[0]):
        estimate = main(smk)
        print("\n".join(estimate["summary"]))
        print(json.dumps(estimate, indent=1))
        write_text_atomic(smk.output[0], json.dumps(estimate, indent=1) + "\n")
except BudgetError as err:  # one line on the console (the log has it too, with the traceback)
    raise SystemExit(f"error: the estimate failed: {err}") from None
