"""Thin entry point: a headline point's Nsight Compute CSV (the details page of its report)
parsed by kernels.measure.ncu, beside its record's model bytes and the launch profiled, into
results/profile/ncu/<impl>.json (what reports.headline reads). A CSV that cannot be parsed
gives a JSON whose dram_reason says why, so that the headline names it."""

import json
from pathlib import Path

from kernels.io.atomic import write_text_atomic
from kernels.io.records import load_json
from kernels.io.script_log import logged_to
from kernels.measure import ncu

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    record = load_json(smk.input.record)
    try:
        launches = ncu.parse_csv(Path(smk.input.csv).read_text())
        found = ncu.summarize(launches) if launches else ncu.unavailable("ncu profiled no kernel")
    except ValueError as err:
        found = ncu.unavailable(f"{smk.input.csv}: {err}")
    launch = smk.params.launch
    summary = {
        "point": smk.params.point,
        **{key: record.get(key) for key in ("impl", "batch", "heads", "tokens", "head_dim", "dtype")},
        **{key: record.get(key) for key in ("causal", "block_m", "block_n", "inputs", "status")},
        "seed": smk.params.seed,
        "launch": [int(n) for n in launch[1].split(",")] if launch else None,
        "record": smk.input.record,
        "report": smk.input.report,
        "csv": smk.input.csv,
        "time_ms": record.get("time_ms"),
        "traffic_model_bytes": record.get("traffic_model_bytes"),
        "traffic_compulsory_bytes": record.get("traffic_compulsory_bytes"),
    } | found
    print(json.dumps({k: v for k, v in summary.items() if k != "ncu_kernels"}, indent=1))
    write_text_atomic(smk.output[0], json.dumps(summary, indent=1) + "\n")
