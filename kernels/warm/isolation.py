"""What one job may change in the worker, and how it is set back before the next.

Before each job the worker's state is set to the one it had when it started: torch's thread
count, default dtype, gradient mode, random seed and backend flags, the signal handlers, the
module search path and the umask; the job then runs with its client's working folder,
environment, arguments, stdout and stderr. After it the caching allocators are emptied and
three things are checked that cannot be set back: memory the job left allocated (more than
the run's limit is a leak), threads it left running, and what every later point reaches that
it replaced (torch's functions, a tensor's methods, our own modules' functions). Each
ends the worker after the job (``retire``), so that the next job starts in a fresh one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import math
import operator
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
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
# What every later point reaches, which a job must leave as it found it (compared by identity
# after each job): every attribute of torch, torch.nn.functional and math; every attribute of a
# tensor, resolved through its bases (torch.Tensor inherits most methods, masked_fill among
# them, from torch._C.TensorBase: vars(torch.Tensor) alone misses them); and every function and
# class of our own modules (kernels.*: the float64 reference, the validation's baseline and
# verdicts, the output check). A name a job adds is no change.
MODULES = {"torch": torch, "torch.nn.functional": torch.nn.functional, "math": math}
CLASSES = {"torch.Tensor": torch.Tensor}
OURS = "kernels"
TORCH_FOLDER = os.path.dirname(torch.__file__) + os.sep
WRAPPED_DEPTH = 8  # how far a torch wrapping is followed back to the function it wraps
_GONE = object()

Reached = dict[str, dict[str, object]]


def _resolved(cls: type) -> dict[str, object]:
    """A class's attributes as an instance finds them: its bases' first, each overridden by
    the classes nearer to it."""
    found: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        found.update(vars(klass))
    return found


def _ours() -> dict[str, dict[str, object]]:
    """Each of our modules now imported: its functions and classes (its other globals are
    its own state, which it may change)."""
    found = {}
    for name, module in list(sys.modules.items()):
        if module is not None and (name == OURS or name.startswith(f"{OURS}.")):
            found[name] = {key: value for key, value in list(vars(module).items()) if callable(value)}
    return found


def reached_now() -> Reached:
    """What a point reaches, as it stands now: namespace → its attributes."""
    found = {name: dict(vars(module)) for name, module in MODULES.items()}
    found |= {name: _resolved(cls) for name, cls in CLASSES.items()}
    return found | _ours()


def _namespace_now(name: str) -> dict[str, object]:
    if name in MODULES:
        return vars(MODULES[name])
    if name in CLASSES:
        return _resolved(CLASSES[name])
    module = sys.modules.get(name)
    return vars(module) if module is not None else {}


def _unwrapped(value: object) -> list[object]:
    """``value`` and, while it is torch's own wrapper (a Python function of torch's files
    with ``__wrapped__``), the function inside it, outermost first."""
    chain = [value]
    for _ in range(WRAPPED_DEPTH):
        code = getattr(value, "__code__", None)
        inner = getattr(value, "__wrapped__", None)
        if code is None or inner is None or not code.co_filename.startswith(TORCH_FOLDER):
            break
        value = inner
        chain.append(value)
    return chain


def torchs_own_wrapping(before: object, now: object) -> bool:
    """torch wraps a few of its own functions on first use (torch._dynamo's import wraps
    torch.manual_seed): torch's own wrapper around the one before. A plugin's function
    (functools.wraps or not) has its code elsewhere, and torch's wrapper around a plugin's
    function holds the plugin's."""
    return any(inner is before for inner in _unwrapped(now)[1:])


def _what_stands(value: object) -> str:
    """Who put ``value`` there (inside torch's own wrappers): the module it says, or where its
    code is when that module is not where its code is (functools.wraps copies a module's
    name, not the code), else its type."""
    if value is _GONE:
        return "removed"
    value = _unwrapped(value)[-1]
    module = getattr(value, "__module__", None)
    code = getattr(value, "__code__", None)
    if code is not None:
        said = getattr(sys.modules.get(module) if isinstance(module, str) else None, "__file__", None)
        if said is None or os.path.realpath(said) != os.path.realpath(code.co_filename):
            return f"by code in {code.co_filename}"
    return f"by {module}" if isinstance(module, str) and module else f"by a {type(value).__name__}"


def _unchanged(before: dict[str, object], now: Mapping[str, object]) -> bool:
    """Whether every name of ``before`` stands in ``now`` as the same object: a lookup and an
    identity test per name inside C (itemgetter, map), the whole cost of a job that changed
    nothing."""
    if not before:
        return True
    try:
        values = operator.itemgetter(*before)(now)
    except KeyError:
        return False
    values = values if len(before) > 1 else (values,)
    return all(map(operator.is_, values, before.values()))


def replaced_in(before: Reached) -> list[str]:
    """What a job replaced or removed of ``before`` (named with who put what stands there
    now); torch's own wrappings are taken into ``before`` instead."""
    found = []
    for space, names in before.items():
        now = _namespace_now(space)
        if _unchanged(names, now):
            continue
        for name, value in names.items():
            current = now.get(name, _GONE)
            if current is value:
                continue
            if torchs_own_wrapping(value, current):
                names[name] = current
                continue
            found.append(f"{space}.{name} {_what_stands(current)}")
    return sorted(found)


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
    reached: Reached = field(default_factory=reached_now)

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

    def replaced(self) -> list[str]:
        """What every later point reaches that the job replaced or removed (``replaced_in``),
        once what can be set back is (torch.set_default_dtype rebinds torch.Storage)."""
        self.set_back()
        return replaced_in(self.reached)


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
    changed = pristine.replaced()
    if changed:
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        return f"the job replaced what later points reach ({', '.join(changed[:5])}{more})", held
    return None, held
