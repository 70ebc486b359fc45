"""Implementation names, importable without torch or triton."""

IMPLEMENTATIONS: tuple[str, ...] = (
    "reference",
    "torch_naive",
    "sdpa",
    "triton_naive",
    "triton_tile_softmax",
    "triton_flash",
)
TRITON_IMPLEMENTATIONS: tuple[str, ...] = tuple(n for n in IMPLEMENTATIONS if n.startswith("triton_"))
DEFAULT_BLOCK = 64
