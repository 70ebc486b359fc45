"""Every allowed value and default of attnio, in one place, importable without torch or triton.

The command line, the implementations' argument checks, the sweep planner and the Snakemake
wildcards read these; the config schema (workflow/schemas/config.schema.yaml) repeats the lists
a user may write, and a test holds the two equal. The implementations' names are not here: they
are registered (kernels.catalog), and a configuration's are checked against the registry.
"""

from __future__ import annotations

SDPA_BACKENDS: tuple[str, ...] = ("math", "flash", "efficient", "cudnn")
# PyTorch's scaled_dot_product_attention: "sdpa" lets PyTorch pick the backend, "sdpa_<name>"
# forces one (a device without it records the point as skipped, naming it).
SDPA_IMPLEMENTATIONS: dict[str, str | None] = {"sdpa": None} | {f"sdpa_{b}": b for b in SDPA_BACKENDS}
# The implementations themselves, ours and plugins', are registered in kernels.catalog (ours:
# the folders of kernels.paths), each with what it stores, its twin and its models.
# The twin a path that does not store S and P is measured against unless it names one
BUILTIN_PACKAGE = "kernels.paths"  # where our paths register (a record's origin starts with it)
# An implementation's name is part of file names (results/validate/<name>_<dtype>_<blocks>.json,
# their temporaries, logs and benchmark records), which a file system holds to 255 bytes: at
# most 64 characters leaves room for every other field at its longest (tests/test_catalog.py).
NAME_LIMIT = 64
DEFAULT_TWIN = "torch_naive"
TRITON_TWIN = "triton_naive"  # the materialized Triton path our other Triton paths are held against
REFERENCE = "reference"  # the float64 definition every path is checked against

# dtype name → bytes per element; the kernels take the first three, float64 is the reference's
ELEMENT_BYTES: dict[str, int] = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
HEAD_DIMS: tuple[int, ...] = (16, 32, 64, 128, 256)
BLOCK_SIZES: tuple[int, ...] = (16, 32, 64, 128, 256)
DEFAULT_BLOCK = 64
# The fused kernel's launch options tried per head dim, (num_warps, num_stages) pairs from the
# space Triton's fused-attention tutorial autotunes over (fewer stages where d = 256 needs the
# shared memory). The build stage compiles each for every target; on a GPU a point is timed
# with each one that builds without spilling, and its record keeps the fastest.
FUSED_LAUNCH_CANDIDATES: dict[int, tuple[tuple[int, int], ...]] = {
    16: ((4, 2), (4, 3), (4, 4)),
    32: ((4, 2), (4, 3), (4, 4)),
    64: ((4, 2), (4, 3), (4, 4), (8, 3)),
    128: ((4, 2), (4, 3), (8, 2), (8, 3)),
    256: ((4, 1), (8, 1), (8, 2)),
}
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
GPU_TARGETS: tuple[str, ...] = ("sm_80", "sm_86", "sm_89", "sm_90")  # with per-SM limits known
# Shared memory one block may use on each target (bytes, with the opt-in attribute: what
# Triton checks when it loads a kernel), from NVIDIA's CUDA C++ Programming Guide, table
# "Technical Specifications per Compute Capability". kernels.build.targets holds the other
# per-SM limits; the fused kernel's default pipelining depth is chosen against these.
MAX_SHARED_PER_BLOCK: dict[str, int] = {"sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90": 232448}
DEFAULT_TARGETS: tuple[str, ...] = ("sm_80", "sm_90")

DEFAULT_INTERPRETER_LIMIT = 1 << 26  # B·H·T² score elements the interpreter takes (T = 8,192)
MAX_ROW_BLOCK = 16384  # longest row the softmax kernel holds at once; longer rows take two passes
MAX_GRID_YZ = 65535  # CUDA's limit on the second and third grid dimensions, which carry B·H
MAX_SPLITS = MAX_GRID_YZ  # a split-KV call's key chunks (num_splits): its grid's third axis
REFERENCE_CHUNK_BYTES = 256 << 20  # float64 scores the error check holds at once

# What the inputs of a point hold. normal: q, k, v from N(0, 1). large: q = k = LARGE_INPUT
# everywhere (a float16 value) and v from N(0, 1); every score d·LARGE_INPUT² is finite in
# float32 and float64 but far beyond float16's largest finite value, so whatever stores S in
# float16 overflows while the definition stays finite.
INPUTS: tuple[str, ...] = ("normal", "large")
DEFAULT_INPUTS = "normal"
LARGE_INPUT = 61440.0
# The upstream gradient dO of a backward case. normal: N(0, 1). large: LARGE_GRADIENT·N(0, 1),
# every element finite in float16 (|dO| < 65,504 below 8 standard deviations), but the products
# dO·Vᵀ a materialized backward stores as dP pass float16's largest finite value while dQ, dK
# and dV (linear in dO) stay finite: a float16 dP or dS overflows, the fused paths' do not.
GRADIENTS: tuple[str, ...] = ("normal", "large")
LARGE_GRADIENT = 8192.0
# The pass a sweep point measures. forward: one call. backward: one forward that saves what
# its path keeps, then the backward from a fresh random dO (timed alone and with the forward).
PASSES: tuple[str, ...] = ("forward", "backward")
DEFAULT_PASS = "forward"
# The inference dimensions a point may add to the square problem (B, H, T, d): query_tokens,
# the queries per sequence against its T keys (absent: T; 1: decode against a KV cache; a few:
# chunked prefill, speculative decoding), and kv_heads, the heads of K and V that groups of
# query heads share (absent: H; 1: multi-query). Causal with fewer queries than keys is aligned
# to the end, as FlashAttention aligns it: query i sees key j iff j <= i + T - query_tokens.
# An implementation takes those it registers (kernels.catalog ``takes``).
INFERENCE_DIMS: tuple[str, ...] = ("query_tokens", "kv_heads")

# Bounds on what a configuration may ask for. Tokens: 2²⁴ (16,777,216), beyond the longest
# context any model is trained on; a point that large is still planned and then skipped for
# its predicted time or memory. Batch and heads: CUDA's grid limit, which carries B·H. Seed:
# 32 bits, so that the per-case seeds derived from it (seed·1,000,003 + case) stay inside the
# 64 bits torch.manual_seed accepts.
MAX_TOKENS = 1 << 24
MAX_SEED = (1 << 32) - 1
# A point whose predicted time per call (its FLOPs and bytes against the machine's measured
# ceilings) exceeds CALL_BUDGET_SECONDS is skipped; a measure job still running after
# JOB_LIMIT_SECONDS is stopped and recorded as failed.
CALL_BUDGET_SECONDS = 30.0
# do_bench on a GPU: milliseconds of warm-up, then of timed repetitions (L2 flushed between)
CUDA_WARMUP_MS = 25
CUDA_REP_MS = 100
# torch.utils.benchmark's timing on a CPU (kernels.measure.timing): timed runs for at least
# CPU_MIN_SECONDS before the median may count as stable, and CPU_MIN_SAMPLES for a slow call
CPU_MIN_SECONDS = 0.2
CPU_MIN_SAMPLES = 10
# The materialized paths' stages (kernels.measure.stages): passes of the chain, warm and cold
# alternating, at least STAGE_MIN_PASSES of each and until STAGE_MIN_SECONDS have gone (at
# most STAGE_MAX_PASSES; less on a GPU, whose events time each stage to the microsecond); a
# slow chain stops at STAGE_FEWEST_PASSES once STAGE_MAX_SECONDS have gone. Cold: the caches
# emptied first by a buffer of STAGE_FLUSH_FACTOR times the CPU's last level (at least
# STAGE_FLUSH_MIN_BYTES), or on a GPU by zeroing CUDA_FLUSH_BYTES (as do_bench does).
STAGE_MIN_PASSES = 10
STAGE_MAX_PASSES = 200
STAGE_MIN_SECONDS: dict[str, float] = {"cpu": 1.0, "cuda": 0.3}
STAGE_FEWEST_PASSES = 3
STAGE_MAX_SECONDS = 4.0
STAGE_FLUSH_FACTOR = 4
STAGE_FLUSH_MIN_BYTES = 64 << 20
CUDA_FLUSH_BYTES = 256_000_000
JOB_LIMIT_SECONDS = 900

# Nsight Compute: the metrics read (its name → the record's field), and the GPU study's
# headline shape, whose materialized and fused points are profiled (workflow/rules/
# profile.smk, full mask, normal inputs) into <results>/PROFILE_DIR, where the headline
# (reports.headline) reads them.
NCU_METRICS: dict[str, str] = {
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "lts__t_bytes.sum": "l2_bytes",
    "gpu__time_duration.sum": "ncu_time_ns",
}
HEADLINE: dict[str, int | str] = {"tokens": 8192, "head_dim": 128, "dtype": "bfloat16"}
PROFILED: tuple[str, ...] = ("triton_naive", "triton_flash")
PROFILE_DIR = "profile/ncu"
# The most B the command line takes: what the configuration's total_tokens (≤ 2³² − 1) can
# make of one token per row; the memory and time gates then decide whether it runs. H is
# bounded by MAX_GRID_YZ, as in the configuration.
MAX_BATCH = (1 << 32) - 1
# Without measured ceilings, a point is first held against a machine slower than any that
# runs this project (1 GB/s, 1 GFLOP/s): within the budget even there, it runs without more
# ado. Otherwise the machine's rates are measured quickly (a 64 MiB copy and a 1,024² product
# on a CPU; the ceilings' own measurement on a GPU) and taken QUICK_CEILINGS_MARGIN times as
# high, so that only a point far over the budget is skipped.
SLOW_MACHINE: dict[str, float] = {"copy_gbps": 1.0, "matmul_tflops": 1e-3}
QUICK_CEILINGS_MARGIN = 10.0

# The ceilings' sampling of a rate (kernels.measure.warm_rate.warm_times, which the copies and
# the operations' rates use): blocks of calls for at least
# RATE_MIN_SECONDS and RATE_MIN_SAMPLES blocks, at most RATE_MAX_SECONDS; a rate timed one call
# at a time (flushed or handed, kernels.measure.op_rates) takes RATE_SINGLE_CALLS calls.
RATE_MIN_SECONDS = 0.15
RATE_MAX_SECONDS = 0.6
RATE_MIN_SAMPLES = 7
RATE_SINGLE_CALLS = 15
# A rate is a rate only where its data took at least this share of a call's time once the fixed
# cost of a call is taken out: the ceilings null theirs below it, and the pages state no
# stage's rate below it (reports.pages.rates).
MIN_DATA_SHARE = 0.05


def rate_seconds(stage_seconds: float) -> tuple[float, float]:
    """The least and the most seconds a CPU rate is sampled for in a study whose stages are
    timed for at least ``stage_seconds`` (config timing): RATE_MIN_SECONDS and
    RATE_MAX_SECONDS at the default, in proportion otherwise (the ci preset: a tenth)."""
    share = stage_seconds / STAGE_MIN_SECONDS["cpu"]
    return RATE_MIN_SECONDS * share, RATE_MAX_SECONDS * share


# Inductor's cache (TORCHINDUCTOR_CACHE_DIR) in a study's folder: what a compiled path
# (FlexAttention) compiles, kept for every job's process and the next run
INDUCTOR_CACHE = ".cache/inductor"
