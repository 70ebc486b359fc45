"""Three costs of Triton's CPU interpreter that do not depend on the kernel, taken out.

1. Every call of a device function (a ``@triton.jit`` helper called from a kernel, as the
   fused kernels' inner loops are) patches ``triton.language`` again: ``inspect.getmembers``
   over four modules and every builtin wrapped anew. The launch around the call has patched
   the same modules already, so the call's own patching changes nothing; it was a fifth of an
   interpreted validation's time (6,642 patchings in one backward validation of
   triton_s_only). Here a call inside a launch that patched the modules it sees skips it.
2. ``_get_np_dtype`` builds an 18-entry dict on each of its calls (tens of thousands per
   validation); here its answers are kept per Triton dtype.
3. Triton's integer-overflow sanitizer, which follows every 32-bit add, subtract and multiply
   with the same operation in 64 bits and an assert, is off, as it is for the compiled kernels
   (Triton applies it there only with ``TRITON_DEBUG=1``, and so does this module). The sizes
   the interpreter runs (config ``interpreter_limit``) keep every 32-bit index far from
   overflowing, and the check was a third of the interpreter tests' time.

The kernels' results are unchanged: the same patched functions run, in the same order, on the
same data; only the overflow asserts are gone.
Installed once, by ``kernels.impl.triton.lang``, only in interpreter mode; ``installed``
says whether it took (a Triton whose interpreter lacks these names is left as it is).
"""

from __future__ import annotations

import dataclasses
import inspect

installed = False


def install() -> bool:
    """Wrap the interpreter's launch, patching and dtype lookup, and turn its overflow
    sanitizer off unless TRITON_DEBUG is on; False (nothing changed) when this Triton's
    interpreter does not have them."""
    global installed
    if installed:
        return True
    import triton
    from triton.runtime import interpreter

    names = ("GridExecutor", "_patch_lang", "_get_np_dtype", "_LangPatchScope", "interpreter_builder")
    if not all(hasattr(interpreter, name) for name in names):
        return False
    launch = _Launch(interpreter._patch_lang, interpreter._LangPatchScope)
    interpreter.GridExecutor.__call__ = launch.running(interpreter.GridExecutor.__call__)
    interpreter._patch_lang = launch.patch_lang
    interpreter._get_np_dtype = _kept(interpreter._get_np_dtype)
    if not triton.knobs.runtime.debug:
        builder = interpreter.interpreter_builder
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)
    installed = True
    return True


def _language_modules(fn) -> frozenset[int]:
    import triton.language as tl

    return frozenset(
        id(value) for value in fn.__globals__.values() if inspect.ismodule(value) and value in (tl, tl.core)
    )


class _Launch:
    """Which language modules the running launch has patched (None: no launch runs)."""

    def __init__(self, patch_lang, scope_type) -> None:
        self.original = patch_lang
        self.scope_type = scope_type
        self.modules: frozenset[int] | None = None

    def running(self, call):
        """A launch (``GridExecutor.__call__``): it patches at its start and restores at its end."""
        launch = self

        def launched(executor, *args, **kwargs):
            outer, launch.modules = launch.modules, frozenset()
            try:
                return call(executor, *args, **kwargs)
            finally:
                launch.modules = outer

        return launched

    def patch_lang(self, fn):
        modules = _language_modules(fn)
        if self.modules and modules <= self.modules:
            return self.scope_type()  # patched by the launch already: nothing to change or restore
        scope = self.original(fn)
        if self.modules is not None:
            self.modules = self.modules | modules
        return scope


def _kept(get_np_dtype):
    found: dict = {}

    def kept(tt_dtype):
        try:
            return found[tt_dtype]
        except KeyError:
            found[tt_dtype] = answer = get_np_dtype(tt_dtype)
            return answer
        except TypeError:  # unhashable: asked every time
            return get_np_dtype(tt_dtype)

    return kept
