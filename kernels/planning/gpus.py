"""The GPUs a prediction is made for, with the vendor figures each prediction needs. Every
figure is a published one (source beside it), not a measurement: a copy does not reach the
datasheet's bandwidth, and on a GPU the ceilings rule measures what it does reach.

The L2 bandwidth and the exponentials' rate (kernels.models.hierarchy's per-stage roofline)
are not datasheet figures: where they come from, and which is an assumption, is said beside
each.

Units: bytes and bytes per second (datasheets' GB/s and TB/s are decimal; NVIDIA's L2 "MB"
is MiB, as the driver reports it: 40 MB on an A100 is 41,943,040 B). Tensor-core rates are
dense (the datasheets' larger "with sparsity" figures halved).
"""

from __future__ import annotations

from dataclasses import dataclass

TERA = 1e12
GIGA = 1e9
MEGA = 1e6
MIB = 1 << 20


@dataclass(frozen=True)
class Gpu:
    name: str
    model: str  # the part the figures are for
    memory_bytes: float  # HBM capacity (the datasheet's GB, 10⁹ bytes)
    target: str  # the build stage's target (kernels.spec.GPU_TARGETS)
    hbm_bytes_per_s: float
    l2_bytes: int
    sms: int
    tensor_flops: dict[str, float]  # dense tensor-core FLOP/s by the products' input dtype
    fp32_flops: float  # FP32 on CUDA cores (no tensor cores): torch's float32 matmul default
    l2_bytes_per_s: float  # L2 read bandwidth (sources and assumptions below)
    exp_per_s: float  # 32-bit exponentials (exp2 on the special-function units)


# H100 and H200 SXM: one GH100 GPU at the same clocks (datasheets: dense = half the sparse figure)
GH100_TENSOR_FLOPS = {"float16": 989.5 * TERA, "bfloat16": 989.5 * TERA, "float32": 494.5 * TERA}
GH100_FP32_FLOPS = 67 * TERA

# Exponentials. CUDA C++ Programming Guide, throughput of the arithmetic instructions: 16
# results per clock per SM for 32-bit base-2 exponential and logarithm at compute capability
# 8.0 and 9.0. A100 SXM4: 108 SMs at its 1,410 MHz boost clock (A100 whitepaper).
SFU_RESULTS_PER_CLOCK_PER_SM = 16
A100_BOOST_HZ = 1410 * MEGA
A100_SMS = 108
# H100 SXM5: FlashAttention-3 (Shah et al., 2024, arXiv:2407.08608, section 3.1) states 3.9
# TFLOPS of special functions against 989 TFLOPS of FP16 products. The H200 SXM is the same
# GH100 GPU with the same SMs and clocks (its datasheet's compute rates equal the H100's), so
# it gets the same figure: an inference, not a published H200 number.
GH100_EXP_PER_S = 3.9 * TERA

# L2 bandwidth. A100 whitepaper (section on the L2 cache): "The A100 L2 read bandwidth is 5120
# Bytes/clk, compared to V100 L2 cache read bandwidth of 2048 Bytes/clk"; at the 1,410 MHz
# boost clock this is a peak (the whitepaper does not name the clock domain: we assume the
# core clock). NVIDIA publishes no such figure for GH100. For the H200 we take a measurement:
# te42kyfo/gpu-benches, gpu-l2-cache/h200.txt (commit 3088b33), 9,766.9 GB/s reading a
# 23,552 kB data set, in the middle of the plateau between about 10 and 40 MB (the file does
# not name the SXM or NVL part). For the H100 SXM5 we found no published measurement; we
# ASSUME the H200's figure (same GH100 GPU, SM count and clocks; L2 speed does not depend on
# the HBM). Mind the difference in kind: the same benchmark reads about 5.4 TB/s on an A100
# 80 GB (gpu-l2-cache/a100_80.txt), below the A100's peak used here.
A100_L2_BYTES_PER_CLOCK = 5120
GH100_L2_BYTES_PER_S = 9766.9 * GIGA

GPUS: dict[str, Gpu] = {
    gpu.name: gpu
    for gpu in (
        # NVIDIA A100 Tensor Core GPU datasheet (SXM4 80 GB): 2,039 GB/s HBM2e; FP16/BF16
        # tensor 312 TFLOPS, TF32 156, FP32 19.5. NVIDIA A100 Tensor Core GPU Architecture
        # whitepaper: 108 SMs, 40 MB L2.
        Gpu(
            name="A100",
            model="A100 SXM4 80 GB",
            memory_bytes=80e9,
            target="sm_80",
            hbm_bytes_per_s=2039e9,
            l2_bytes=40 * MIB,
            sms=A100_SMS,
            tensor_flops={"float16": 312 * TERA, "bfloat16": 312 * TERA, "float32": 156 * TERA},
            fp32_flops=19.5 * TERA,
            l2_bytes_per_s=A100_L2_BYTES_PER_CLOCK * A100_BOOST_HZ,
            exp_per_s=SFU_RESULTS_PER_CLOCK_PER_SM * A100_SMS * A100_BOOST_HZ,
        ),
        # NVIDIA H100 Tensor Core GPU datasheet (SXM 80 GB): 3.35 TB/s HBM3; FP16/BF16 tensor
        # 1,979 TFLOPS with sparsity (989.5 dense), TF32 989 (494.5 dense), FP32 67. NVIDIA
        # H100 Tensor Core GPU Architecture whitepaper: 132 SMs and 50 MB L2 on the SXM5 part.
        Gpu(
            name="H100",
            model="H100 SXM5 80 GB",
            memory_bytes=80e9,
            target="sm_90",
            hbm_bytes_per_s=3.35e12,
            l2_bytes=50 * MIB,
            sms=132,
            tensor_flops=GH100_TENSOR_FLOPS,
            fp32_flops=GH100_FP32_FLOPS,
            l2_bytes_per_s=GH100_L2_BYTES_PER_S,
            exp_per_s=GH100_EXP_PER_S,
        ),
        # NVIDIA H200 Tensor Core GPU datasheet (SXM 141 GB): 4.8 TB/s HBM3e; the same tensor
        # and FP32 rates as the H100 SXM (the same GH100 GPU, 132 SMs). The datasheet gives no
        # L2 size; the GH100 die carries 60 MB (H100 whitepaper), of which the H100 SXM5
        # enables 50. We take 60 MB, the figure of this project's design brief; a GPU run
        # records the size the device reports (l2_bytes in results/env.json), which settles
        # it, and the "Predicted on GPUs" page shows that figure beside this one.
        Gpu(
            name="H200",
            model="H200 SXM 141 GB",
            memory_bytes=141e9,
            target="sm_90",
            hbm_bytes_per_s=4.8e12,
            l2_bytes=60 * MIB,
            sms=132,
            tensor_flops=GH100_TENSOR_FLOPS,
            fp32_flops=GH100_FP32_FLOPS,
            l2_bytes_per_s=GH100_L2_BYTES_PER_S,
            exp_per_s=GH100_EXP_PER_S,
        ),
    )
}
