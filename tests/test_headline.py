"""The GPU study's headline lines (reports.headline), from GPU-shaped rows and records: the
fused kernel against the fastest SDPA backend (each side saying how its time was chosen),
the softmax kernel's DRAM bandwidth against the measured copy rate, the model against Nsight
Compute's DRAM bytes; every line names the file it came from."""

import json
import re
from pathlib import Path

import pandas as pd

from kernels import catalog
from reports import headline

CANDIDATES = json.dumps(
    [
        {"num_warps": 4, "num_stages": 2, "time_ms": 1.4},
        {"num_warps": 8, "num_stages": 2, "time_ms": 1.2},
        {"num_warps": 8, "num_stages": 3, "time_ms": 1.3},
    ]
)


def row(impl, time_ms, causal=False, tokens=8192, **launch):
    fused = impl.startswith("triton")
    return dict(**catalog.describe(impl), impl=impl, tokens=tokens, head_dim=128, dtype="bfloat16",
                causal=causal, inputs="normal", status="ok", time_ms=time_ms, tflops=1000 / time_ms,
                block_m=128 if fused else None, block_n=64 if fused else None,
                num_warps=launch.get("num_warps"), num_stages=launch.get("num_stages"),
                launch_candidates=launch.get("candidates"))  # fmt: skip


def fused(time_ms, causal=False):
    return row("triton_flash", time_ms, causal, num_warps=8, num_stages=2, candidates=CANDIDATES)


def test_the_fused_kernel_is_held_against_the_fastest_backend_per_mask():
    metrics = pd.DataFrame(
        [row("sdpa", 2.0), row("sdpa_cudnn", 1.5), fused(1.2), row("sdpa_flash", 9.0, tokens=4096)]
    )
    [line] = headline.fused_against_sdpa(metrics, "results/metrics.csv")
    assert "triton_flash 1.200 ms" in line and "fastest SDPA backend sdpa_cudnn 1.500 ms" in line
    assert line.endswith("ratio 1.25 (results/metrics.csv)")
    assert headline.fused_against_sdpa(metrics[metrics["impl"] != "triton_flash"])[0].startswith("no timed")


def test_each_side_of_the_comparison_says_how_its_time_was_chosen():
    """The fused kernel's time is the fastest of its candidates' medians, the SDPA side the
    fastest of one median per backend: the line says both, per mask."""
    metrics = pd.DataFrame(
        [
            row("sdpa_flash", 1.5),
            row("sdpa_cudnn", 1.6),
            fused(1.2),
            row("sdpa_flash", 1.0, causal=True),
            row("triton_flash", 0.9, causal=True),  # timed at its default launch only
        ]
    )
    full, causal = headline.fused_against_sdpa(metrics)
    assert "the fastest of its 3 launch candidates' medians, 8 warps, 2 stages" in full
    assert "the fastest of 2 backends' medians, one each" in full and " full:" in full
    assert (
        "one median, at its default launch" in causal
        and "sdpa_flash 1.000 ms (1000 TFLOP/s; one median)" in causal
    )


NAIVE = catalog.describe("triton_naive") | {
    "impl": "triton_naive",
    "tokens": 8192,
    "dram_bytes": 3 * 2**30,
    "traffic_model_bytes": 2 * 2**30,
    "launch": None,
    "dram_reason": None,
    "ncu_kernels": [
        {"kernel": "softmax_kernel", "dram_read_bytes": 2e9, "dram_write_bytes": 2e9, "ncu_time_ns": 1e6},
        {"kernel": "scores_kernel", "dram_read_bytes": 1e9, "dram_write_bytes": 0, "ncu_time_ns": 1e6},
    ],
}
FLASH = catalog.describe("triton_flash") | {
    "impl": "triton_flash",
    "tokens": 8192,
    "dram_bytes": 3 * 2**20,
    "traffic_model_bytes": 2 * 2**20,
    "launch": [8, 2],
    "dram_reason": None,
    "ncu_kernels": [
        {"kernel": "flash_kernel", "dram_read_bytes": 2e6, "dram_write_bytes": 1e6, "ncu_time_ns": 1e6}
    ],
}


def test_softmax_bandwidth_and_dram_against_the_model():
    record = NAIVE | {"source": "results/profile/ncu/triton_naive.json"}
    [bandwidth] = headline.softmax_bandwidth([record], {"copy_gbps": 4000.0}, "results/ceilings.json")
    assert bandwidth.startswith("triton_naive softmax kernel: 4,000 GB/s")
    assert "100% of the measured copy" in bandwidth
    assert bandwidth.endswith("(results/profile/ncu/triton_naive.json, results/ceilings.json)")
    [dram] = headline.model_against_dram([record])
    assert "DRAM 3,072 MiB" in dram and "model 2,048 MiB" in dram
    assert dram.endswith("ratio 1.50 (results/profile/ncu/triton_naive.json)")


# what the ceilings command writes on an H200 (its schema asks for each field)
H200_CEILINGS = {"device": "cuda", "device_name": "NVIDIA H200", "threads": 1, "copy_gbps": 4000.0}
H200_CEILINGS |= {"matmul_tflops": 700.0, "matmul_dtype": "bfloat16", "exp_per_s": 1e12, "call_us": 6.0}
H200_CEILINGS["levels"] = [
    {"level": "L2", "bytes": 60 << 20, "footprint_bytes": 30 << 20, "copy_gbps": 9000.0},
    {"level": "DRAM", "bytes": None, "footprint_bytes": 240 << 20, "copy_gbps": 4000.0},
]


def write_results(results: Path) -> None:
    """A GPU study's results as the profiling leaves them: the table, the ceilings, and the
    two profile records the headline reads."""
    results.mkdir(parents=True)
    pd.DataFrame(
        [row("sdpa_cudnn", 1.5), fused(1.2), row("sdpa", 1.9, causal=True), fused(1.1, True)]
    ).to_csv(results / "metrics.csv", index=False)
    (results / "ceilings.json").write_text(json.dumps(H200_CEILINGS))
    (results / "profile" / "ncu").mkdir(parents=True)
    for record in (NAIVE, FLASH):
        (results / "profile" / "ncu" / f"{record['impl']}.json").write_text(json.dumps(record))


def named_files(line: str) -> tuple[list[str], str]:
    """The files a line ends by naming, and the one it names as missing."""
    named = re.search(r"\(([^()]*)\)$", line)
    assert named, f"names no file: {line}"
    files, _, missing = named.group(1).partition("missing: ")
    return [f for f in files.rstrip("; ").split(", ") if f], missing


def test_every_headline_line_names_the_file_it_came_from(tmp_path):
    results = tmp_path / "results"
    write_results(results)
    lines = headline.lines(results)
    assert len(lines) == 5  # two masks, the softmax, the model against DRAM for both points
    for line in lines:
        files, missing = named_files(line)
        assert files and not missing and all(Path(f).exists() for f in files), line
    assert any(
        f"{results}/profile/ncu/triton_flash.json" in line and "launch 8,2 as timed" in line for line in lines
    )

    (results / "profile" / "ncu" / "triton_flash.json").unlink()
    (results / "ceilings.json").write_text(json.dumps(H200_CEILINGS | {"copy_gbps": 0}))  # damaged: unused
    softmax = next(line for line in headline.lines(results) if "softmax" in line)
    assert named_files(softmax)[1] == f"{results}/ceilings.json"
    (results / "ceilings.json").unlink()
    lines = headline.lines(results)
    assert lines[-1] == (
        "no Nsight Compute record of triton_flash, scripts/gpu_profile.sh writes it "
        f"(missing: {results}/profile/ncu/triton_flash.json)"
    )
    softmax = next(line for line in lines if "softmax" in line)
    assert named_files(softmax) == ([f"{results}/profile/ncu/triton_naive.json"], f"{results}/ceilings.json")
    assert headline.lines(tmp_path / "nothing") == [
        f"no timed GPU point (missing: {tmp_path}/nothing/metrics.csv)",
        *(
            f"no Nsight Compute record of {impl}, scripts/gpu_profile.sh writes it "
            f"(missing: {tmp_path}/nothing/profile/ncu/{impl}.json)"
            for impl in headline.PROFILED
        ),
    ]
