"""Every allowed value and default of attnio, in one place, importable without torch or triton.

The command line, the implementations' argument checks, the sweep planner and the Snakemake
wildcards read these; the config schema (workflow/schemas/config.schema.yaml) repeats the lists
a user may write, and a test holds the two equal.
"""

from __future__ import annotations

IMPLEMENTATIONS: tuple[str, ...] = (
    "reference",
    "torch_naive",
    "sdpa",
    "triton_naive",
    "triton_tile_softmax",
    "triton_flash",
)
TRITON_IMPLEMENTATIONS: tuple[str, ...] = tuple(n for n in IMPLEMENTATIONS if n.startswith("triton_"))
MATERIALIZED: tuple[str, ...] = ("reference", "torch_naive", "triton_naive")  # S and P stored
DEFAULT_IMPLEMENTATIONS: tuple[str, ...] = tuple(n for n in IMPLEMENTATIONS if n != "reference")

# dtype name → bytes per element; the kernels take the first three, float64 is the reference's
ELEMENT_BYTES: dict[str, int] = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
HEAD_DIMS: tuple[int, ...] = (16, 32, 64, 128, 256)
BLOCK_SIZES: tuple[int, ...] = (16, 32, 64, 128, 256)
DEFAULT_BLOCK = 64
SDPA_BACKENDS: tuple[str, ...] = ("math", "flash", "efficient", "cudnn")

DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
GPU_TARGETS: tuple[str, ...] = ("sm_80", "sm_86", "sm_89", "sm_90")  # with per-SM limits known
DEFAULT_TARGETS: tuple[str, ...] = ("sm_80", "sm_90")

DEFAULT_INTERPRETER_LIMIT = 1 << 20  # B·H·T² score elements the interpreter takes (T = 1,024)
MAX_ROW_BLOCK = 16384  # longest row the softmax kernel holds at once; longer rows take two passes
MAX_GRID_YZ = 65535  # CUDA's limit on the second and third grid dimensions, which carry B·H
REFERENCE_CHUNK_BYTES = 256 << 20  # float64 scores the error check holds at once
