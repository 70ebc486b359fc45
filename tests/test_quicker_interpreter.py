"""The interpreter's per-call patching taken out (kernels/impl/triton/quicker_interpreter.py):
one patching per launch however often its device functions are called, the language as
Triton left it after the launch; its overflow sanitizer off unless TRITON_DEBUG asks for it.
That the kernels' numbers are the same is every kernel test's question."""

import subprocess
import sys

import torch
from workflow_run import env

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


def test_the_overflow_sanitizer_is_off_as_in_compiled_kernels_unless_triton_debug_is_on():
    from triton.runtime import interpreter

    assert interpreter.interpreter_builder.options.sanitize_overflow is False
    code = (
        "from kernels.impl.triton import lang\n"
        "from triton.runtime import interpreter\n"
        "print(interpreter.interpreter_builder.options.sanitize_overflow)"
    )
    for debug, kept in (("1", "True"), ("0", "False")):
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=env() | {"ATTNIO_INTERPRET": "1", "TRITON_DEBUG": debug},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and done.stdout.strip() == kept, done.stderr[-2000:]
