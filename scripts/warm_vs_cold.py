"""The same points measured by a warm worker and by processes of their own, interleaved (A B A
B ...) so that both see the same machine: the timings' ratio and whether their spreads overlap.

    python scripts/warm_vs_cold.py [ROUNDS]      (default 3; run it alone on a quiet machine)

Each point is a `python -m kernels measure` command, as the workflow's measure jobs run it:
once through the warm worker of a session this script holds open, once with ATTNIO_WORKER=0.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from kernels.io.compare import spreads_overlap
from kernels.warm import session

# float32 torch paths of the default study: short, middle and long calls, with and without stages
POINTS = [
    ("torch_naive", 256, "full"),
    ("torch_naive", 1024, "full"),
    ("torch_naive", 4096, "causal"),
    ("sdpa", 256, "full"),
    ("sdpa", 1024, "causal"),
    ("sdpa_math", 4096, "full"),
]


def measure(impl: str, tokens: int, mask: str, out: Path, env: dict) -> dict:
    args = ["measure", "--impl", impl, "--batch", "1", "--heads", "1", "--tokens", str(tokens)]
    args += ["--head-dim", "64", "--dtype", "float32", "--device", "cpu", "--no-ncu", "--out", str(out)]
    args += ["--threads", str(len(os.sched_getaffinity(0)))] + (["--causal"] if mask == "causal" else [])
    subprocess.run([sys.executable, "-m", "kernels", *args], env=env, check=True, capture_output=True)
    return json.loads(out.read_text())


def main(argv: list[str]) -> int:
    rounds = int(argv[0]) if argv else 3
    with tempfile.TemporaryDirectory(prefix="attnio-warm-vs-cold-") as tmp:
        run = session.begin(tmp, leak_mb=512)
        warm_env = os.environ | {"ATTNIO_INTERPRET": "1"}
        cold_env = warm_env | {"ATTNIO_WORKER": "0"}
        found: dict[tuple, dict[str, list[dict]]] = {}
        try:
            for _ in range(rounds):
                for point in POINTS:
                    for name, env in (("warm", warm_env), ("cold", cold_env)):
                        record = measure(*point, Path(tmp, "out.json"), env)
                        found.setdefault(point, {}).setdefault(name, []).append(record)
        finally:
            session.end(run)
    ratios = []
    for point, runs in found.items():
        warm = statistics.median(r["time_ms"] for r in runs["warm"])
        cold = statistics.median(r["time_ms"] for r in runs["cold"])
        spread = {
            k: (min(r["time_p10_ms"] for r in v), max(r["time_p90_ms"] for r in v)) for k, v in runs.items()
        }
        overlap = spreads_overlap(spread["warm"], spread["cold"])
        ratios.append(warm / cold)
        print(
            f"{point[0]:12s} T={point[1]:5d} {point[2]:6s}: warm {warm:.4g} ms, own process {cold:.4g} ms, "
            f"ratio {warm / cold:.3f}; spreads p10–p90 over {rounds} rounds "
            f"{'overlap' if overlap else 'do not overlap'}"
        )
    print(f"warm over own process: median {statistics.median(ratios):.3f} over {len(ratios)} points")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
