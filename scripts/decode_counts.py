"""What PyTorch's CPU SDPA does with grouped K/V heads at one query row, counted rather than
timed (docs/decode.md): a busy machine changes a time, not a count.

1. PyTorch's profiler on one call of SDPA (enable_gqa) and of torch_naive (a K/V head's query
   heads stacked as the rows of one product), with a K/V head per query head and with one for
   all: the ATen operations each call ran and its peak allocation (kernels.measure.memory, as
   a record's ops_run and peak_alloc_bytes).
2. The same calls run once more under Valgrind's callgrind, each counted alone after three
   calls that warm the caches: instructions, data reads that miss a simulated 32 KiB L1 and a
   4 MiB last-level cache (the suite machine's sizes, tests/suite_machine.py), and calls of
   ATen's cpublas::gemm, the product routine the CPU flash kernel calls per block of keys.

    .venv/bin/python scripts/decode_counts.py [--tokens 4096] [--heads 8] [--head-dim 64]

The second part runs Python under Valgrind: minutes on an idle machine, many on a busy one.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

VALGRIND = [
    "valgrind",
    "--tool=callgrind",
    "--collect-atstart=no",  # each counted call toggles collection on, then dumps and off
    "--cache-sim=yes",
    "--I1=32768,8,64",
    "--D1=32768,8,64",
    "--LL=4194304,16,64",
]
GEMM = "at::native::cpublas::gemm("
WARM_CALLS = 3


def calls(args: argparse.Namespace) -> list[tuple[str, int, object]]:
    """(path, K/V heads, the call) for each case, on inputs made once."""
    import torch

    from kernels.paths.sdpa.forward import sdpa
    from kernels.paths.torch_naive.forward import torch_naive

    torch.manual_seed(0)
    q = torch.randn(1, args.heads, 1, args.head_dim)
    found = []
    for kv_heads in (args.heads, 1):
        k, v = (torch.randn(1, kv_heads, args.tokens, args.head_dim) for _ in range(2))
        for name, fn in (("sdpa", sdpa), ("torch_naive", torch_naive)):
            found.append((name, kv_heads, lambda fn=fn, k=k, v=v: fn(q, k, v, False)))
    return found


def profiled(args: argparse.Namespace) -> None:
    from kernels.measure.memory import profiled_cpu

    for name, kv_heads, call in calls(args):
        call()
        peak, ops, _ = profiled_cpu(call)
        print(f"{name}, {kv_heads} K/V heads: peak {peak:,} B; ops: {', '.join(ops)}")


def counted(args: argparse.Namespace) -> None:
    """Run under callgrind: each case's call counted alone (one dump per case)."""
    import torch

    from kernels._compat import callgrind_counted

    torch.set_num_threads(1)  # one thread: the counts are the work, not its split
    for name, kv_heads, call in calls(args):
        for _ in range(WARM_CALLS):
            call()
        with callgrind_counted():
            call()
        print(f"counted: {name}, {kv_heads} K/V heads", flush=True)


def totals(dump: Path) -> tuple[dict[str, int], int]:
    """The dump's event totals and its calls of cpublas::gemm."""
    names: dict[str, str] = {}
    events: list[str] = []
    found: dict[str, int] = {}
    gemm_calls, callee = 0, ""
    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith(("totals:", "summary:")):
            found = dict(zip(events, map(int, line.split()[1:]), strict=False))
        elif line.startswith("cfn="):
            m = re.match(r"cfn=\((\d+)\)(?: (.*))?", line)
            if m:
                names.setdefault(m.group(1), m.group(2) or "")
                callee = names[m.group(1)]
        elif line.startswith("calls=") and GEMM in callee:
            gemm_calls += int(line.split("=")[1].split()[0])
    return found, gemm_calls


def under_valgrind(args: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: no counts")
        return
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "cg.out"
        command = [*VALGRIND, f"--callgrind-out-file={out}", sys.executable, __file__, "--counted"]
        command += [
            "--tokens",
            str(args.tokens),
            "--heads",
            str(args.heads),
            "--head-dim",
            str(args.head_dim),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        cases = [
            line.removeprefix("counted: ")
            for line in done.stdout.splitlines()
            if line.startswith("counted: ")
        ]
        dumps = sorted(Path(folder).glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        if done.returncode != 0 or len(dumps) != len(cases):
            print(f"callgrind failed ({done.returncode}): {done.stderr[-2000:]}")
            return
        print("case: instructions, L1 data read misses, last-level data read misses, cpublas::gemm calls")
        for case, dump in zip(cases, dumps, strict=True):
            found, gemm = totals(dump)
            print(f"{case}: {found['Ir']:,}, {found['D1mr']:,}, {found['DLmr']:,}, {gemm:,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--counted", action="store_true", help=argparse.SUPPRESS)  # under valgrind
    args = parser.parse_args()
    if args.counted:
        counted(args)
        return
    import torch

    print(
        f"torch {torch.__version__}; B = 1, H = {args.heads}, T = {args.tokens:,}, "
        f"d = {args.head_dim}, float32"
    )
    profiled(args)
    under_valgrind(args)


if __name__ == "__main__":
    main()
