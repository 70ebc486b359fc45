"""What one job may change in the worker, and how it is set back before the next.

Before each job the worker's state is set to the one it had when it started: torch's thread
count, default dtype, gradient mode, random seed and backend flags, the signal handlers, the
module search path and the umask; the job then runs with its client's working folder,
environment, arguments, stdout and stderr. After it the caching allocators are emptied and
three things are checked that cannot be set back: memory the job left allocated (more than
the run's limit is a leak), threads it left running, and torch functions it replaced. Each
ends the worker after the job (``retire``), so that the next job starts in a fresh one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import torch

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGUSR1, signal.SIGUSR2)
THREAD_WAIT_S = 2.0  # for a job's own helper threads (a cancelled timer) to end

# (getter, setter) of each torch setting a job may change
FLAGS: dict[str, tuple[Callable[[], object], Callable[[object], None]]] = {
    "num_threads": (torch.get_num_threads, torch.set_num_threads),
    "default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
    "grad_enabled": (torch.is_grad_enabled, torch.set_grad_enabled),
    "anomaly": (torch.is_anomaly_enabled, torch.set_anomaly_enabled),
    "deterministic": (
        torch.are_deterministic_algorithms_enabled,
        lambda on: torch.use_deterministic_algorithms(bool(on)),
    ),
    "matmul_precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    "cuda_matmul_tf32": (
        lambda: torch.backends.cuda.matmul.allow_tf32,
        lambda on: setattr(torch.backends.cuda.matmul, "allow_tf32", on),
    ),
    "cuda_fp16_reduction": (
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        lambda on: setattr(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", on),
    ),
    "cuda_bf16_reduction": (
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        lambda on: setattr(torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", on),
    ),
    "cudnn_enabled": (
        lambda: torch.backends.cudnn.enabled,
        lambda on: setattr(torch.backends.cudnn, "enabled", on),
    ),
    "cudnn_tf32": (
        lambda: torch.backends.cudnn.allow_tf32,
        lambda on: setattr(torch.backends.cudnn, "allow_tf32", on),
    ),
    "cudnn_benchmark": (
        lambda: torch.backends.cudnn.benchmark,
        lambda on: setattr(torch.backends.cudnn, "benchmark", on),
    ),
    "cudnn_deterministic": (
        lambda: torch.backends.cudnn.deterministic,
        lambda on: setattr(torch.backends.cudnn, "deterministic", on),
    ),
    "mkldnn_enabled": (
        lambda: torch.backends.mkldnn.enabled,
        lambda on: setattr(torch.backends.mkldnn, "enabled", on),
    ),
}
# modules whose functions a job must not replace (compared by identity after each job)
WATCHED = {"torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.functional": torch.nn.functional}


def _watched_ids() -> dict[str, int]:
    found = {}
    for prefix, holder in WATCHED.items():
        for name, value in list(vars(holder).items()):
            if callable(value) and not isinstance(value, type(torch)):
                found[f"{prefix}.{name}"] = id(value)
    return found


def _replacement(prefix: str, name: str) -> str | None:
    """The module of what now stands at ``prefix.name``, when it is not torch's own (torch
    wraps a few of its functions itself on first use, torch._dynamo's import among them)."""
    value = getattr(WATCHED[prefix], name, None)
    module = getattr(value, "__module__", None) or ""
    return None if module.split(".")[0] == "torch" else module or "?"


def rss_bytes() -> int | None:
    """This process's resident memory (Linux: /proc/self/statm); None where unknown."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def _libc():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


_LIBC = _libc()


def release_memory() -> None:
    """Collect garbage, empty torch's CUDA cache and give the C heap's free pages back, so
    that what stays resident is what is still allocated."""
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    if _LIBC is not None and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)


def settle() -> None:
    """Release memory, then freeze what is left (gc.freeze): the imports' and the rehearsal's
    objects live as long as the worker, and a collection after each job then walks only what
    jobs made (about 40 ms for each job without it, with torch and triton imported)."""
    release_memory()
    gc.freeze()


def allocated_bytes() -> int:
    """What the process holds: resident host memory and, on a GPU, torch's allocations there."""
    found = rss_bytes() or 0
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        found += torch.cuda.memory_allocated()
    return found


@dataclass
class Pristine:
    """The worker's state as it started, which each job begins from."""

    flags: dict[str, object]
    seed: int
    handlers: dict[int, object]
    path: list[str]
    umask: int
    environ: dict[str, str]
    cwd: str
    argv: list[str]
    watched: dict[str, int] = field(default_factory=_watched_ids)

    @classmethod
    def now(cls) -> Pristine:
        umask = os.umask(0)
        os.umask(umask)
        return cls(
            flags={name: get() for name, (get, _) in FLAGS.items()},
            seed=torch.initial_seed(),
            handlers={s: signal.getsignal(s) for s in HANDLED_SIGNALS},
            path=list(sys.path),
            umask=umask,
            environ=dict(os.environ),
            cwd=os.getcwd(),
            argv=list(sys.argv),
        )

    def set_back(self) -> None:
        for name, (get, put) in FLAGS.items():
            if get() != self.flags[name]:
                put(self.flags[name])
        torch.manual_seed(self.seed)
        random.seed()
        for signum, handler in self.handlers.items():
            signal.signal(signum, handler)
        sys.path[:] = self.path
        os.umask(self.umask)

    def replaced_functions(self) -> list[str]:
        """Torch functions a job replaced by its own (named with the replacement's module)."""
        now = _watched_ids()
        found = []
        for key, ident in self.watched.items():
            if now.get(key, ident) == ident:
                continue
            prefix, name = key.rsplit(".", 1)
            module = _replacement(prefix, name)
            if module:
                found.append(f"{key} by {module}")
        return sorted(found)


@contextmanager
def job(pristine: Pristine, request: dict, fds: list[int]) -> Iterator[None]:
    """The job's surroundings: its folder, environment, arguments and output files, in a
    state set back to the pristine one, with the thread count its OMP_NUM_THREADS gives (as
    torch's default in a process of its own); everything of the worker's own restored after."""
    pristine.set_back()
    threads = job_threads(request["env"])
    if threads:
        torch.set_num_threads(threads)
    saved = [os.dup(1), os.dup(2)]
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["python -m kernels", *request["argv"]]
        for target, fd in zip((1, 2), fds, strict=False):
            os.dup2(fd, target)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()
        for target, fd in zip((1, 2), saved, strict=False):
            os.dup2(fd, target)
            os.close(fd)
        for fd in fds:
            os.close(fd)
        os.chdir(pristine.cwd)
        os.environ.clear()
        os.environ.update(pristine.environ)
        sys.argv = list(pristine.argv)
        pristine.set_back()


def job_threads(environ: dict) -> int | None:
    """The thread count a process of its own would start with: OMP_NUM_THREADS when it is a
    positive number (Snakemake sets it to the job's threads)."""
    try:
        threads = int(environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return threads if threads > 0 else None


def cuda_broken() -> str | None:
    """A CUDA error leaves the context unusable for every later job: the error, if any."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
    except Exception as err:  # noqa: BLE001 (any error means the context is gone)
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return None


def extra_threads(before: int) -> int:
    """Threads the job left running beyond the ``before`` it started with, after a wait for
    its own short-lived ones."""
    deadline = time.monotonic() + THREAD_WAIT_S
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    return max(0, threading.active_count() - before)


def retire_reason(
    pristine: Pristine, held_before: int, threads_before: int, leak_limit: int
) -> tuple[str | None, int]:
    """Why the worker must end after this job (None: it may serve the next one), and the
    bytes the job left held."""
    broken = cuda_broken()
    if broken:
        return f"a CUDA error left the GPU context unusable ({broken})", 0
    release_memory()
    held = max(0, allocated_bytes() - held_before)
    if held > leak_limit:
        mib = held / 2**20
        return f"memory leaked: the process held {mib:,.0f} MiB more after the job than before it", held
    left = extra_threads(threads_before)
    if left:
        return f"the job left {left} thread(s) running", held
    replaced = pristine.replaced_functions()
    if replaced:
        return f"the job replaced torch functions ({', '.join(replaced[:5])})", held
    return None, held
