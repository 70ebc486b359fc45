"""The GPU study's headline lines (reports.headline), from GPU-shaped rows and records: the
fused kernel against the fastest SDPA backend, the softmax kernel's DRAM bandwidth against
the measured copy rate, the model against Nsight Compute's DRAM bytes."""

import pandas as pd

from reports import headline


def row(impl, time_ms, causal=False, tokens=8192):
    return dict(impl=impl, tokens=tokens, head_dim=128, dtype="bfloat16", causal=causal,
                inputs="normal", status="ok", time_ms=time_ms, tflops=1000 / time_ms)  # fmt: skip


def test_the_fused_kernel_is_held_against_the_fastest_backend_per_mask():
    metrics = pd.DataFrame(
        [
            row("sdpa", 2.0),
            row("sdpa_cudnn", 1.5),
            row("triton_flash", 1.2),
            row("sdpa_flash", 9.0, tokens=4096),
        ]
    )
    [line] = headline.fused_against_sdpa(metrics)
    assert "triton_flash 1.200 ms" in line and "fastest SDPA backend sdpa_cudnn 1.500 ms" in line
    assert line.endswith("ratio 1.25")
    assert headline.fused_against_sdpa(metrics[metrics["impl"] != "triton_flash"])[0].startswith("no timed")


def test_softmax_bandwidth_and_dram_against_the_model():
    record = {
        "impl": "triton_naive",
        "tokens": 8192,
        "dram_bytes": 3 * 2**30,
        "traffic_model_bytes": 2 * 2**30,
        "ncu_kernels": [
            {"kernel": "softmax_kernel", "dram_read_bytes": 2e9, "dram_write_bytes": 2e9, "ncu_time_ns": 1e6},
            {"kernel": "scores_kernel", "dram_read_bytes": 1e9, "dram_write_bytes": 0, "ncu_time_ns": 1e6},
        ],
    }
    [bandwidth] = headline.softmax_bandwidth([record], {"copy_gbps": 4000.0})
    assert (
        bandwidth.startswith("triton_naive softmax kernel: 4,000 GB/s")
        and "100% of the measured copy" in bandwidth
    )
    [dram] = headline.model_against_dram([record])
    assert "DRAM 3,072 MiB" in dram and "model 2,048 MiB" in dram and dram.endswith("ratio 1.50")
