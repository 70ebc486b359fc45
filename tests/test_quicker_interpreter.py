"""The interpreter's per-call patching taken out (kernels/impl/triton/quicker_interpreter.py):
one patching per launch however often its device functions are called, the language as
Triton left it after the launch, and the same numbers as the kernel gives without it."""

import torch

from kernels.impl.triton import quicker_interpreter
from kernels.impl.triton.lang import tl, triton


@triton.jit
def _twice(x):
    return x + x


@triton.jit
def _doubling_kernel(x_ptr, out_ptr, N: tl.constexpr, ROUNDS: tl.constexpr):
    offsets = tl.arange(0, N)
    x = tl.load(x_ptr + offsets)
    for _ in range(ROUNDS):
        x = _twice(x)  # a device function, called ROUNDS times
    tl.store(out_ptr + offsets, x)


def test_a_launch_patches_the_language_once_and_leaves_it_as_it_was(monkeypatch):
    from triton.runtime import interpreter

    assert quicker_interpreter.installed  # the suite runs kernels in the interpreter
    launch = interpreter._patch_lang.__self__
    patched = []
    original = launch.original
    monkeypatch.setattr(launch, "original", lambda fn: patched.append(fn.__name__) or original(fn))
    before = {name: getattr(tl, name) for name in ("load", "store", "arange", "dot")}
    x = torch.rand(16, dtype=torch.float32)
    out = torch.empty_like(x)
    _doubling_kernel[(1,)](x, out, N=16, ROUNDS=5)
    assert torch.equal(out, x * 32)
    assert patched == ["_doubling_kernel"]  # not once more for each of the five calls
    assert {name: getattr(tl, name) for name in before} == before  # restored after the launch
    _doubling_kernel[(1,)](x, out, N=16, ROUNDS=5)
    assert patched == ["_doubling_kernel"] * 2  # the next launch patches again
