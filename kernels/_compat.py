"""Every private Triton and PyTorch internal attnio relies on, in one place, each checked
against the releases it was written for:

- Triton's interpreter: its load/store builder methods and its launch-argument hook, patched
  while traffic is counted (``kernels.measure.traffic``);
- Triton's JIT: its signature binder and argument packing, used to specialize a launch for a
  GPU that is not there exactly as the JIT would (``kernels.build.compile``);
- PyTorch's profiler: the raw kineto events, replayed for the peak CPU allocation
  (``kernels.measure.memory``).

With any other release these raise ``CompatError`` naming the feature, the installed version
and the releases known to work, instead of failing somewhere inside the library.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

KNOWN = {"triton": ("3.6", "3.7"), "torch": ("2.13",)}


class CompatError(RuntimeError):
    pass


def release(version: str) -> str:
    """'3.7.1' → '3.7'; '2.13.0+cpu' → '2.13'."""
    return ".".join(version.split("+")[0].split(".")[:2])


def require(package: str, feature: str) -> None:
    """Raise CompatError unless the installed ``package`` is a release ``feature`` knows."""
    module = __import__(package)
    if release(module.__version__) not in KNOWN[package]:
        raise CompatError(
            f"{feature} uses private internals of {package}, written for {package} "
            f"{' and '.join(KNOWN[package])}; this machine has {package} {module.__version__}. "
            f"Install one of those releases, or port kernels/_compat.py to it."
        )


# --- Triton's interpreter: counting global loads and stores ----------------------------------

Access = Callable[[str, Any, Any, int], None]  # (op, addresses, enabled lanes, element bytes)
Launch = Callable[[str, list[str], tuple], None]  # (kernel name, argument names, host arguments)


@contextmanager
def interpreter_hooks(on_launch: Launch, on_access: Access) -> Iterator[None]:
    """Call ``on_launch`` as each interpreted kernel starts and ``on_access`` for each global
    load and store it executes, while the block is open."""
    import numpy as np

    require("triton", "counting interpreter traffic")
    from triton.runtime import interpreter

    builder, executor = interpreter.InterpreterBuilder, interpreter.GridExecutor
    original_load, original_store = builder.create_masked_load, builder.create_masked_store
    original_init = executor._init_args_hst

    def report(op: str, ptrs, mask) -> None:
        addresses = np.asarray(ptrs.data).astype(np.uint64, copy=False)
        enabled = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
        on_access(op, addresses, enabled, ptrs.get_element_ty().primitive_bitwidth // 8)

    def masked_load(self, ptrs, mask, other, *rest):
        report("load", ptrs, mask)
        return original_load(self, ptrs, mask, other, *rest)

    def masked_store(self, ptrs, value, mask, *rest):
        report("store", ptrs, mask)
        return original_store(self, ptrs, value, mask, *rest)

    def init_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_init(self, args_dev, kwargs)
        on_launch(self.fn.__name__, list(self.arg_names), args_hst)
        return args_hst, kwargs_hst

    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    executor._init_args_hst = init_args
    try:
        yield
    finally:
        builder.create_masked_load, builder.create_masked_store = original_load, original_store
        executor._init_args_hst = original_init


# --- Triton's JIT: specializing a launch ahead of time -------------------------------------


def specialize(kernel, args: tuple, options: dict, target):
    """(ASTSource, options) exactly as Triton's JIT builds them for ``kernel[grid](*args,
    **options)`` on ``target`` (a ``GPUTarget``), without a GPU."""
    require("triton", "building kernels ahead of time")
    from triton import knobs
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    backend = make_backend(target)
    kwargs = dict(options)
    kwargs["debug"] = kwargs.get("debug", kernel.debug) or knobs.runtime.debug  # as JITFunction.run
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, packed = binder(*args, **kwargs)
    packed, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound, specialization, packed)
    return ASTSource(kernel, signature, constexprs, attrs), packed


# --- PyTorch's profiler: CPU allocations ---------------------------------------------------


def op_names(prof) -> list[str]:
    """The names of the operations (ATen's, ``aten::...``) a finished
    ``torch.autograd.profiler.profile`` recorded, each once, in the order first called."""
    require("torch", "listing the operations a call ran")
    events = sorted(prof.kineto_results.events(), key=lambda event: event.start_ns())
    return list(dict.fromkeys(event.name() for event in events if event.name() != "[memory]"))


def memory_events(prof) -> list[tuple[int, int]]:
    """(start ns, bytes allocated (+) or freed (−)) of every allocator event a finished
    ``torch.autograd.profiler.profile(profile_memory=True)`` recorded."""
    require("torch", "measuring the peak CPU allocation")
    return [
        (event.start_ns(), event.nbytes())
        for event in prof.kineto_results.events()
        if event.name() == "[memory]"
    ]


# --- Valgrind's callgrind: counting one call ---------------------------------------------------


@contextmanager
def callgrind_counted() -> Iterator[None]:
    """Collect callgrind's counts for the block alone, then dump them (a process run under
    ``valgrind --tool=callgrind --collect-atstart=no``; a no-op elsewhere)."""
    require("torch", "counting a call under callgrind")
    import torch

    torch._C._valgrind_toggle()
    try:
        yield
    finally:
        torch._C._valgrind_toggle_and_dump_stats()


# --- TorchDynamo and Inductor: compiling a function that must stay compiled ----------------

DYNAMO_SETTINGS = ("recompile_limit", "fail_on_recompile_limit_hit")


@contextmanager
def compiling(limit: int) -> Iterator[None]:
    """Within the block, a compiled function may hold ``limit`` specializations (a study's
    shapes and masks: Dynamo's default, 8, is a few points) and one past it raises instead of
    running the function uncompiled; Inductor compiles in the calling thread (its default pool
    of helper threads and processes would outlive the point). Dynamo's and Inductor's config
    names, present in torch 2.11 to 2.13."""
    import torch._dynamo.config as dynamo
    import torch._inductor.config as inductor

    missing = [name for name in DYNAMO_SETTINGS if not hasattr(dynamo, name)]
    missing += [] if hasattr(inductor, "compile_threads") else ["compile_threads (Inductor)"]
    if missing:
        import torch

        raise CompatError(
            f"compiling FlexAttention uses torch._dynamo.config's {' and '.join(missing)}, which "
            f"torch {torch.__version__} lacks (written for torch 2.11 to 2.13); port kernels/_compat.py"
        )
    limits = dynamo.patch(recompile_limit=limit, fail_on_recompile_limit_hit=True)
    with limits, inductor.patch(compile_threads=1):
        yield
