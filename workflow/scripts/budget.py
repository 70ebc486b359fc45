"""Thin entry point: results/budget.json, the study's estimated duration on this GPU
(kernels.study.budget), after measuring a job's start-up and one kernel compile here."""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernels.io.atomic import write_text_atomic
from kernels.io.script_log import logged_to
from kernels.study.budget import Machine, estimate
from kernels.study.gpus import GPUS
from kernels.study.point import Point

STARTUP = "import torch; torch.cuda.is_available() and torch.cuda.init()"


def startup_seconds() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", STARTUP], check=True)
    return time.perf_counter() - started


def compile_seconds(points: list[Point], target: str) -> float:
    """One build of the sweep's first Triton point, its candidates left out: the compile
    time the build records, per variant."""
    triton = [p for p in points if p.triton]
    if not triton:
        return 0.0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "build.json")
        subprocess.run(
            [sys.executable, "-m", "kernels", "build", "--target", target, "--point", triton[0].name,
             "--no-candidates", "--out", str(out), "--artifacts", tmp],
            check=True,
        )  # fmt: skip
        records = json.loads(out.read_text())["variants"]
    return sum(r["compile_s"] for r in records) / len(records)


def local_gpu() -> tuple[str, str]:
    """This machine's GPU among those the model knows, and its target; without a GPU, the
    H200 and sm_90 the GPU study is sized for (a rehearsal)."""
    import torch

    from kernels.study.device import local_target

    if not torch.cuda.is_available():
        return "H200", "sm_90"
    name = torch.cuda.get_device_name()
    known = [key for key in GPUS if key in name]
    if not known:
        raise SystemExit(f"{name}: not among the GPUs the model knows ({', '.join(GPUS)})")
    return known[0], local_target()


smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    from kernels.measure.validate import CUDA_SHAPES

    points = [Point.from_name(name) for name in smk.params.points]
    gpu, target = local_gpu()
    machine = Machine(startup_seconds(), compile_seconds(points, target), smk.params.cores)
    found = estimate(points, GPUS[gpu], machine, validation_cases=2 * len(CUDA_SHAPES))
    print(json.dumps(found, indent=1))
    write_text_atomic(smk.output[0], json.dumps(found, indent=1) + "\n")
