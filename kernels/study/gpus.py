"""The GPUs a prediction is made for, with the vendor figures each prediction needs. Every
figure is a published one (source beside it), not a measurement: a copy does not reach the
datasheet's bandwidth, and on a GPU the ceilings rule measures what it does reach.

Units: bytes and bytes per second (datasheets' GB/s and TB/s are decimal; NVIDIA's L2 "MB"
is MiB, as the driver reports it: 40 MB on an A100 is 41,943,040 B). Tensor-core rates are
dense (the datasheets' larger "with sparsity" figures halved).
"""

from __future__ import annotations

from dataclasses import dataclass

TERA = 1e12
MIB = 1 << 20


@dataclass(frozen=True)
class Gpu:
    name: str
    model: str  # the part the figures are for
    target: str  # the build stage's target (kernels.spec.GPU_TARGETS)
    hbm_bytes_per_s: float
    l2_bytes: int
    sms: int
    tensor_flops: dict[str, float]  # dense tensor-core FLOP/s by the products' input dtype
    fp32_flops: float  # FP32 on CUDA cores (no tensor cores): torch's float32 matmul default


# H100 and H200 SXM: one GH100 GPU at the same clocks (datasheets: dense = half the sparse figure)
GH100_TENSOR_FLOPS = {"float16": 989.5 * TERA, "bfloat16": 989.5 * TERA, "float32": 494.5 * TERA}
GH100_FP32_FLOPS = 67 * TERA

GPUS: dict[str, Gpu] = {
    gpu.name: gpu
    for gpu in (
        # NVIDIA A100 Tensor Core GPU datasheet (SXM4 80 GB): 2,039 GB/s HBM2e; FP16/BF16
        # tensor 312 TFLOPS, TF32 156, FP32 19.5. NVIDIA A100 Tensor Core GPU Architecture
        # whitepaper: 108 SMs, 40 MB L2.
        Gpu(
            name="A100",
            model="A100 SXM4 80 GB",
            target="sm_80",
            hbm_bytes_per_s=2039e9,
            l2_bytes=40 * MIB,
            sms=108,
            tensor_flops={"float16": 312 * TERA, "bfloat16": 312 * TERA, "float32": 156 * TERA},
            fp32_flops=19.5 * TERA,
        ),
        # NVIDIA H100 Tensor Core GPU datasheet (SXM 80 GB): 3.35 TB/s HBM3; FP16/BF16 tensor
        # 1,979 TFLOPS with sparsity (989.5 dense), TF32 989 (494.5 dense), FP32 67. NVIDIA
        # H100 Tensor Core GPU Architecture whitepaper: 132 SMs and 50 MB L2 on the SXM5 part.
        Gpu(
            name="H100",
            model="H100 SXM5 80 GB",
            target="sm_90",
            hbm_bytes_per_s=3.35e12,
            l2_bytes=50 * MIB,
            sms=132,
            tensor_flops=GH100_TENSOR_FLOPS,
            fp32_flops=GH100_FP32_FLOPS,
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
            target="sm_90",
            hbm_bytes_per_s=4.8e12,
            l2_bytes=60 * MIB,
            sms=132,
            tensor_flops=GH100_TENSOR_FLOPS,
            fp32_flops=GH100_FP32_FLOPS,
        ),
    )
}
