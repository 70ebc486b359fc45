"""The implementations attnio knows, ours and anyone's, registered the same way.

An implementation is a callable with ``kernels.attention``'s arguments and a few facts the
study needs to plan, count and compare it: whether it stores S and P (and in what dtype, how
many query rows at once), whether it is a Triton kernel (counted under the interpreter, its
block sizes swept), its materialized twin and, optionally, its as-issued traffic model. One
decorator registers it::

    from kernels.catalog import implementation

    @implementation("my_flash", stores="none", triton=True, twin="triton_naive")
    def my_flash(q, k, v, *, causal, block_m, block_n):
        ...

Ours are the modules of ``kernels.paths``. Others come from the modules named by the
configuration's ``plugins`` (or ``ATTNIO_PLUGINS``, comma-separated: what the workflow's jobs
inherit) and from the Python entry-point group ``attnio.implementations``. A plugin that fails
to import, registers a name already taken, gives a bad fact or a callable of the wrong
signature is left out and kept as a ``Problem`` naming it and why; the rest loads.

Pure Python: registering imports neither torch nor triton (ours import their kernels on first
call); a plugin's own module is imported after Triton's mode is fixed.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from kernels import masks
from kernels.spec import BUILTIN_PACKAGE, DEFAULT_TWIN, ELEMENT_BYTES, INFERENCE_DIMS, NAME_LIMIT

CAUSAL_OR_FULL = frozenset({"full", "causal"})  # causal true or false: a registration's default
EVERY_MASK = tuple(masks.KINDS)  # masks= of a path that takes them all

ENTRY_POINT_GROUP = "attnio.implementations"
PLUGINS_VARIABLE = "ATTNIO_PLUGINS"
# said with an unknown name when no plugin module is named: how a plugin's names are found
PLUGIN_HINT = (
    f"a plugin's names are found once {PLUGINS_VARIABLE} (comma-separated) or the configuration's "
    f"plugins name its module, or once it is installed with an {ENTRY_POINT_GROUP} entry point"
)
MODE_VARIABLES = ("ATTNIO_INTERPRET", "TRITON_INTERPRET")  # kernels.impl.mode's switches
# What an implementation keeps in memory between its steps: S and P (materialized), S only
# (softmax statistics from S, then S streamed into P·V) or neither (fused).
STORES: tuple[str, ...] = ("SP", "S", "none")
# How an implementation differentiates: AUTOGRAD (its callable returns an O that carries
# PyTorch's autograd graph), or a module with the backward contract of kernels.impl.autograd
# (forward_saving, backward, planned_backward_launches, SAVED).
AUTOGRAD = "autograd"
# an implementation's name: lower-case letters, digits and _, starting with a letter, at most
# NAME_LIMIT characters (it names files); name_problem says which rule a name breaks
FIRST, REST = "[a-z]", "[a-z0-9_]"
NAME = re.compile(rf"{FIRST}{REST}{{0,{NAME_LIMIT - 1}}}")
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# A traffic model: the point → bytes by (kernel, tensor, op), as the interpreter counts them
# (kernel: the @triton.jit function's name without "_kernel"; tensor: its argument's name).
TrafficModel = Callable[[Any], Mapping[tuple[str, str, str], int]]
# The registration's hooks given as a callable or "module:function"
HOOKS = (
    "traffic_model",
    "working_model",
    "launch_candidates",
    "launches",
    "stages",
    "backward_traffic_model",
    "stage_model",
    "kept_model",
    "backward_flops_model",
    "backward_stage_model",
    "backward_stages",
    "programs_model",
    "flops_model",
    "unavailable",
)
BACKWARD_HOOKS = (
    "backward_traffic_model",
    "kept_model",
    "backward_flops_model",
    "backward_stage_model",
    "backward_stages",
)


class PluginError(ValueError):
    """A registration refused: the message names the plugin and the reason."""


@dataclass(frozen=True)
class Problem:
    plugin: str
    reason: str

    def __str__(self) -> str:
        return f"plugin {self.plugin}: {self.reason}"


@dataclass(frozen=True)
class Implementation:
    name: str
    run: Callable[..., Any]
    stores: str  # one of STORES
    twin: str  # the materialized implementation its speed-up is measured against
    triton: bool = False
    sp_dtype: str | None = None  # dtype S and P are stored in; None: the input dtype
    stored_rows: int | None = None  # query rows whose S and P exist at once; None: all T
    options: frozenset[str] = frozenset()  # keyword options beyond the common arguments
    # The inference dimensions it takes (kernels.spec.INFERENCE_DIMS): "query_tokens", q with
    # fewer rows than k and v (causal aligned to the end); "kv_heads", k and v with fewer heads
    # than q, each serving a group of query heads. A point with one it does not take is skipped.
    takes: frozenset[str] = frozenset()
    traffic_model: TrafficModel | str | None = None  # a callable or "module:function"
    # A Triton kernel's launches for the build stage to compile ahead of time: a callable
    # (q, k, v, *, causal, block_m, block_n, **options) → [kernels.impl.triton.launch.Launch]
    # on meta tensors, or "module:function"; None: its kernels compile on first call.
    launches: Callable[..., list] | str | None = None
    # Its steps one by one, for the stage timing: a callable (q, k, v, causal[, block_m,
    # block_n], **options) → ([(stage, run)], O) on buffers allocated once, a Triton one's
    # stages named as its traffic model's kernels, or "module:function"; None: timed as a
    # whole call only.
    stages: Callable[..., tuple] | str | None = None
    takes_out: bool = False  # writes the result into ``out=`` itself
    default: bool = False  # in the default sweep
    # Each key tile normalized by its own statistics: wrong on purpose wherever a row spans
    # two key tiles (validation expects it to fail there; it never stands for a kind of path)
    tile_local: bool = False
    cpu: bool = True  # runs on a CPU (else its CPU points are skipped, its validation unavailable)
    # S written as the raw product q·kᵀ and scaled in place after (the largest value it
    # stores is the product's, not the score's)
    raw_s: bool = False
    softmax_dtype: str | None = None  # the dtype its softmax runs in; None: the stored one
    # The bytes a call holds at its peak beyond Q, K, V, O, S and P (point → bytes, pure
    # Python); None: nothing beyond them
    working_model: Callable[..., int] | str | None = None
    # Launch configurations the build compiles and a GPU point is timed with: point →
    # ((num_warps, num_stages), ...), passed to ``launches`` (pure Python); None: one launch
    launch_candidates: Callable[..., tuple] | str | None = None
    origin: str = BUILTIN_PACKAGE  # the module that registered it
    # AUTOGRAD, a backward module ("package.module", see AUTOGRAD), or None: no backward
    backward: str | None = None
    no_backward: str | None = None  # why it has none, said where a gradient is asked of it
    backward_traffic_model: TrafficModel | str | None = None  # the backward's kernels, as issued
    # The models beyond traffic, each a callable of the point or "module:function" (pure
    # Python: planning imports no torch). None: not modelled, said so where it is asked for.
    stage_model: Callable[..., list] | str | None = None  # forward stages → [StageCost]; None:
    # one stage per kernel of the traffic model
    kept_model: Callable[..., Mapping[str, int]] | str | None = None  # bytes kept, by tensor
    backward_flops_model: Callable[..., int] | str | None = None  # the backward's FLOPs as executed
    backward_stage_model: Callable[..., list] | str | None = None  # backward kernels → [StageCost]
    # Its backward's steps one by one, for the stage timing: (q, k, v, do, causal[, block_m,
    # block_n], **options) → ([(stage, run)], (dQ, dK, dV)), named as backward_stage_model's
    backward_stages: Callable[..., tuple] | str | None = None
    # Its programs split each row's keys across programs and merge their partial results (a
    # decode design: kernels.models.decode compares it with one program per query block)
    split_keys: bool = False
    # point → the programs its launch that streams K and V makes (pure Python), what a GPU's
    # SMs are filled with; None: not modelled
    programs_model: Callable[..., int] | str | None = None
    # The mask kinds it takes (kernels.masks.KINDS). Beyond full and causal it is called with
    # the mask itself as ``mask=`` (and ``causal=``, True for the causal mask); a call with a
    # mask it does not take is refused, naming its registration.
    masks: frozenset[str] = CAUSAL_OR_FULL
    # Those its backward takes (a gradient under another is refused): by default every one
    # of ``masks`` where PyTorch's autograd differentiates it, full and causal for a module
    backward_masks: frozenset[str] = CAUSAL_OR_FULL
    # Compiled on its first call for each shape and mask (torch.compile): that call is timed
    # apart, as the record's compile_seconds, and never among the timed calls
    compiles: bool = False
    # point → the FLOPs its kernels execute (pure Python), where they differ from the
    # convention's (kernels.models.cost.flops: the scores the mask keeps); None: the convention's
    flops_model: Callable[..., int] | str | None = None
    # (point, device) → why this device cannot run the point (a backend, a backward, a compiler
    # it lacks here), or None: the point is then recorded skipped with that reason
    unavailable: Callable[..., str | None] | str | None = None

    def shape_refusal(self, query_tokens: bool, kv_heads: bool) -> str | None:
        """Why it cannot run a problem with fewer queries than keys or grouped K/V heads, or None."""
        asked = [dim for dim, given in zip(INFERENCE_DIMS, (query_tokens, kv_heads), strict=True) if given]
        missing = [dim for dim in asked if dim not in self.takes]
        if not missing:
            return None
        return (
            f"impl={self.name!r} does not take {' or '.join(missing)} (its registration's takes= "
            f"lists {', '.join(sorted(self.takes)) or 'neither'})"
        )

    @property
    def takes_masks(self) -> bool:
        """Whether it takes masks beyond full and causal (and so is called with ``mask=``)."""
        return bool(self.masks - CAUSAL_OR_FULL)

    def mask_refusal(self, mask: masks.Mask) -> str | None:
        """Why it cannot run under ``mask``, or None."""
        return _mask_refusal(mask, self.masks, f"impl={self.name!r}", "masks")

    def backward_mask_refusal(self, mask: masks.Mask) -> str | None:
        """Why its backward cannot run under ``mask``, or None."""
        return _mask_refusal(mask, self.backward_masks, f"impl={self.name!r}'s backward", "backward_masks")

    def backward_reason(self) -> str | None:
        """Why a gradient cannot be taken through it, or None where it can."""
        if self.backward is not None:
            return None
        return self.no_backward or (
            "it registers no backward (give @implementation(..., backward='package.module') a module "
            "with forward_saving and backward, or return an O that carries autograd's graph and say "
            f"backward={AUTOGRAD!r})"
        )

    def backward_module(self):
        """The backward's module, imported on first use; None for AUTOGRAD or none."""
        if self.backward in (None, AUTOGRAD):
            return None
        return _imported(self.backward)

    def backward_model(self) -> TrafficModel | None:
        return _resolved(self.backward_traffic_model)

    @property
    def materialized(self) -> bool:
        return self.stores == "SP"

    @property
    def ours(self) -> bool:
        return self.origin.startswith(BUILTIN_PACKAGE)

    def model(self) -> TrafficModel | None:
        """The as-issued traffic model, imported on first use when named by a string."""
        return _resolved(self.traffic_model)

    def planned_launches(self) -> Callable[..., list] | None:
        """The build stage's launch planner, imported on first use when named by a string."""
        return _resolved(self.launches)

    def stage_chain(self) -> Callable[..., tuple] | None:
        """The stage-by-stage form, imported on first use when named by a string."""
        return _resolved(self.stages)

    def hook(self, field: str) -> Callable | None:
        """One of MODEL_FIELDS or BACKWARD_STAGES' callable, imported on first use."""
        return _resolved(getattr(self, field))


def _resolved(ref):
    """A callable given as itself or as "module:function"."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    return getattr(_imported(module), attr)


def _imported(module: str):
    """A module a registration names, imported (again, where a warm worker set the process
    back between jobs) only once Triton's mode is fixed: a plugin's kernels are decorated on
    import, and one decorated outside the mode runs on no device."""
    if module not in sys.modules and not module.startswith(BUILTIN_PACKAGE + "."):
        importlib.import_module("kernels.impl.mode").for_decoration()
    return importlib.import_module(module)


_registered: dict[str, Implementation] = {}
_problems: list[Problem] = []
_loaded: set[str] = set()  # modules imported (ours, plugins, entry points)
_loading: list[str] = []  # the module being imported now (names a registration's plugin)


def implementation(
    name: str,
    *,
    stores: str,
    twin: str | None = None,
    triton: bool = False,
    sp_dtype: str | None = None,
    stored_rows: int | None = None,
    options: Iterable[str] = (),
    takes: Iterable[str] = (),
    traffic_model: TrafficModel | str | None = None,
    launches: Callable[..., list] | str | None = None,
    stages: Callable[..., tuple] | str | None = None,
    takes_out: bool = False,
    default: bool = False,
    tile_local: bool = False,
    cpu: bool = True,
    raw_s: bool = False,
    softmax_dtype: str | None = None,
    working_model: Callable[..., int] | str | None = None,
    launch_candidates: Callable[..., tuple] | str | None = None,
    backward: str | None = None,
    no_backward: str | None = None,
    backward_traffic_model: TrafficModel | str | None = None,
    stage_model: Callable[..., list] | str | None = None,
    kept_model: Callable[..., Mapping[str, int]] | str | None = None,
    backward_flops_model: Callable[..., int] | str | None = None,
    backward_stage_model: Callable[..., list] | str | None = None,
    backward_stages: Callable[..., tuple] | str | None = None,
    split_keys: bool = False,
    programs_model: Callable[..., int] | str | None = None,
    masks: Iterable[str] = ("full", "causal"),
    backward_masks: Iterable[str] | None = None,
    compiles: bool = False,
    flops_model: Callable[..., int] | str | None = None,
    unavailable: Callable[..., str | None] | str | None = None,
) -> Callable[[Callable], Callable]:
    """Register the decorated callable as implementation ``name`` (see the module's doc).
    ``twin`` defaults to the implementation itself when it stores S and P, else torch_naive.
    ``backward`` defaults to AUTOGRAD for a PyTorch path and to none for a Triton one."""

    def register(fn: Callable) -> Callable:
        _builtins()  # ours first: a plugin imported on its own cannot take one of our names
        origin = _loading[-1] if _loading else getattr(fn, "__module__", "?")
        backward_name = backward if backward is not None or triton or no_backward else AUTOGRAD
        autograd = backward_name == AUTOGRAD
        entry = Implementation(
            name=name,
            run=fn,
            stores=stores,
            twin=twin or (name if stores == "SP" else DEFAULT_TWIN),
            triton=triton,
            sp_dtype=sp_dtype,
            stored_rows=stored_rows,
            options=_names_of(options, name),
            takes=_names_of(takes, name, "takes"),
            traffic_model=traffic_model,
            launches=launches,
            stages=stages,
            takes_out=takes_out,
            default=default,
            tile_local=tile_local,
            cpu=cpu,
            raw_s=raw_s,
            softmax_dtype=softmax_dtype,
            working_model=working_model,
            launch_candidates=launch_candidates,
            origin=origin,
            backward=backward_name,
            no_backward=no_backward,
            backward_traffic_model=backward_traffic_model,
            stage_model=stage_model,
            kept_model=kept_model,
            backward_flops_model=backward_flops_model,
            backward_stage_model=backward_stage_model,
            backward_stages=backward_stages,
            split_keys=split_keys,
            programs_model=programs_model,
            masks=_mask_kinds(masks, name, "masks"),
            backward_masks=_mask_kinds(
                backward_masks if backward_masks is not None else masks if autograd else CAUSAL_OR_FULL,
                name,
                "backward_masks",
            ),
            compiles=compiles,
            flops_model=flops_model,
            unavailable=unavailable,
        )
        _check(entry)
        _registered[name] = entry
        return fn

    return register


def _names_of(options: Iterable[str], name: str, field: str = "options") -> frozenset[str]:
    if isinstance(options, str) or not all(isinstance(o, str) for o in options):
        raise PluginError(f"implementation {name!r}: {field}={options!r}; give a list of names")
    return frozenset(options)


def _mask_refusal(mask: masks.Mask, kinds: frozenset[str], who: str, field: str) -> str | None:
    if mask.KIND in kinds:
        return None
    return (
        f"{who} does not take the mask {mask.spelled()!r} (its registration's {field}= lists "
        f"{', '.join(sorted(kinds))})"
    )


def _mask_kinds(kinds: Iterable[str], name: str, field: str) -> frozenset[str]:
    found = _names_of(kinds, name, field)
    if not found or found - set(masks.KINDS):
        raise PluginError(
            f"implementation {name!r}: {field}={sorted(kinds)!r}; the mask kinds are {', '.join(masks.KINDS)}"
        )
    return found


def _materialized(name: str) -> bool:
    return name in _registered and _registered[name].materialized


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name an implementation (the rule NAME holds it to), or None."""
    if not isinstance(name, str) or not re.fullmatch(rf"{FIRST}{REST}*", name):
        return "a name is lower-case letters, digits and _, starting with a letter"
    if len(name) > NAME_LIMIT:
        return (
            f"a name is at most {NAME_LIMIT} characters (this one has {len(name):,}): it is part of "
            "file names, which the file system holds to 255 bytes"
        )
    return None


def shown_name(name: object) -> str:
    """A name as a message shows it: a long one cut after its first 40 characters."""
    return (
        f"{name[:40]!r}… ({len(name):,} characters)"
        if isinstance(name, str) and len(name) > 48
        else repr(name)
    )


def _check(entry: Implementation) -> None:
    """Refuse what the study could not plan, naming the field and what is allowed."""
    where = f"implementation {shown_name(entry.name)} (from {entry.origin})"
    if why := name_problem(entry.name):
        raise PluginError(f"{where}: {why}")
    if entry.name in _registered:
        taken = _registered[entry.name].origin
        raise PluginError(f"{where}: the name {entry.name!r} is already registered by {taken}")
    for flag in ("triton", "takes_out", "default", "tile_local", "cpu", "raw_s", "split_keys", "compiles"):
        if not isinstance(getattr(entry, flag), bool):
            raise PluginError(f"{where}: {flag}={getattr(entry, flag)!r}; must be True or False")
    own_twin = entry.twin == entry.name and entry.stores == "SP"
    if not entry.ours and not own_twin and not _materialized(entry.twin):
        stored = [n for n, i in _registered.items() if i.materialized]
        raise PluginError(
            f"{where}: twin={entry.twin!r} is not a registered implementation that stores S and P; "
            f"those registered: {', '.join(stored)}"
        )
    if not entry.takes <= set(INFERENCE_DIMS):
        raise PluginError(
            f"{where}: takes={sorted(entry.takes)!r}; allowed names are {', '.join(INFERENCE_DIMS)}"
        )
    if entry.stores not in STORES:
        raise PluginError(f"{where}: stores={entry.stores!r}; allowed values are {', '.join(STORES)}")
    for field in ("sp_dtype", "softmax_dtype"):
        given = getattr(entry, field)
        if given is not None and given not in ELEMENT_BYTES:
            allowed = ", ".join(ELEMENT_BYTES)
            raise PluginError(f"{where}: {field}={given!r}; allowed values are {allowed} or None")
    rows = entry.stored_rows
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
        raise PluginError(f"{where}: stored_rows={rows!r}; must be a positive integer or None")
    if not callable(entry.run):
        raise PluginError(f"{where}: {entry.run!r} is not callable")
    _check_backward(where, entry)
    for name in HOOKS:
        ref = getattr(entry, name)
        if ref is not None and not callable(ref) and not (isinstance(ref, str) and ":" in ref):
            raise PluginError(f"{where}: {name} must be a callable or 'module:function'")
        if isinstance(ref, str) and not _module_exists(ref.partition(":")[0]):
            module = ref.partition(":")[0]
            raise PluginError(f"{where}: {name}={ref!r}: no module named {module!r} can be imported")
    _check_signature(where, entry)


def _check_backward(where: str, entry: Implementation) -> None:
    if entry.backward not in (None, AUTOGRAD) and not (
        isinstance(entry.backward, str) and _module_exists(entry.backward)
    ):
        raise PluginError(
            f"{where}: backward={entry.backward!r}; give {AUTOGRAD!r}, an importable module with "
            "forward_saving and backward, or None"
        )
    if entry.no_backward is not None and (not isinstance(entry.no_backward, str) or entry.backward):
        raise PluginError(f"{where}: no_backward is a reason (text), given only with no backward")
    given = [field for field in BACKWARD_HOOKS if getattr(entry, field) is not None]
    if entry.backward is None and given:
        raise PluginError(
            f"{where}: {given[0]} describes a backward, but the registration gives none (backward=)"
        )


def _module_exists(module: str) -> bool:
    """Whether ``module`` can be found (without importing it: a model's module may import
    torch, and planning does not)."""
    if not MODULE.fullmatch(module):
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or fails to import
        return False


def _check_signature(where: str, entry: Implementation) -> None:
    """The callable must take (q, k, v, *, causal[, block_m, block_n]) as attention passes them."""
    try:
        signature = inspect.signature(entry.run)
    except (TypeError, ValueError):
        return  # a builtin or C extension: trusted, its first call tells
    given = ({"block_m": 64, "block_n": 64} if entry.triton else {}) | (
        {"out": None} if entry.takes_out else {}
    )
    try:
        signature.bind(None, None, None, causal=False, **given)
    except TypeError as err:
        wanted = "(q, k, v, *, causal" + "".join(f", {name}" for name in given) + ")"
        raise PluginError(f"{where}: the callable must accept {wanted}; {err}") from None


# --- loading -------------------------------------------------------------------------------


def _import(module: str, plugin: str) -> None:
    """Import a module that registers implementations; its failure becomes a Problem."""
    if module in _loaded:
        return
    _loaded.add(module)
    if not module.startswith(BUILTIN_PACKAGE):
        # a plugin's Triton kernels are decorated on import: attnio's mode must be fixed first
        importlib.import_module("kernels.impl.mode").for_decoration()
    _loading.append(module)  # its registrations' origin; ``plugin`` names it in a problem
    before = set(_registered)
    try:
        importlib.import_module(module)
    except Exception as err:  # a broken plugin must not stop the study
        reason = str(err) if isinstance(err, PluginError) else f"import failed: {type(err).__name__}: {err}"
        _problems.append(Problem(plugin, reason))
        for name in set(_registered) - before:  # all of a failed plugin is left out
            del _registered[name]
    finally:
        _loading.pop()


def _builtins() -> None:
    """Import our modules once, each named as its registrations' origin."""
    if BUILTIN_PACKAGE in _loaded:
        return
    _loaded.add(BUILTIN_PACKAGE)
    package = importlib.import_module(BUILTIN_PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        name = f"{BUILTIN_PACKAGE}.{info.name}"
        _loaded.add(name)
        _loading.append(name)
        try:
            importlib.import_module(name)  # ours: an error is a bug, raised
        finally:
            _loading.pop()


def configured_plugins() -> list[str]:
    """The plugin modules ``ATTNIO_PLUGINS`` names."""
    return [m.strip() for m in os.environ.get(PLUGINS_VARIABLE, "").split(",") if m.strip()]


def use_plugins(modules: Iterable[str]) -> list[Problem]:
    """Load these plugin modules now and name them in ``ATTNIO_PLUGINS``, so that the
    processes started from here (the workflow's jobs) load the same. Returns every problem.
    The Triton mode fixed here to import them is not handed on: each job fixes its own."""
    modules = list(modules)
    for module in modules:
        if not isinstance(module, str) or not MODULE.fullmatch(module):
            raise ValueError(f"plugins: {module!r} is not a module name (e.g. mypkg.attention)")
    named = list(dict.fromkeys(configured_plugins() + modules))
    if named:
        os.environ[PLUGINS_VARIABLE] = ",".join(named)
    switches = {name: os.environ.get(name) for name in MODE_VARIABLES}
    try:
        load()
    finally:
        for name, value in switches.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return problems()


_found_entry_points = False


def load() -> None:
    """Ours, then entry points, then ``ATTNIO_PLUGINS``; each module once (the variable is
    read again on every lookup, a cheap check)."""
    global _found_entry_points
    _builtins()
    if not _found_entry_points:
        _found_entry_points = True
        for point in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
            _import(point.value.partition(":")[0].strip(), f"{point.value} (entry point {point.name})")
    for module in configured_plugins():
        _import(module, module)


# --- lookups -------------------------------------------------------------------------------


def registered() -> dict[str, Implementation]:
    """Every implementation: ours in their modules' order (whichever of our modules was
    imported first), then plugins' in the order they registered."""
    load()
    modules = sorted(m for m in _loaded if m.startswith(BUILTIN_PACKAGE + "."))
    rank = {module: i for i, module in enumerate(modules)}
    order = sorted(_registered.values(), key=lambda e: rank.get(e.origin, len(rank)))
    return {entry.name: entry for entry in order}


def names() -> tuple[str, ...]:
    """Every registered name: ours in their modules' order, then plugins'."""
    return tuple(registered())


def problems() -> list[Problem]:
    load()
    return list(_problems)


def get(name: str) -> Implementation:
    """The implementation ``name``; an unknown name is an error listing the allowed ones and
    any plugin that failed to load. One of ours is found without importing any plugin (whose
    Triton kernels would fix the mode before a command chose it)."""
    _builtins()
    if name in _registered:
        return _registered[name]
    known = registered()
    if name in known:
        return known[name]
    failed = "".join(f"; {p}" for p in _problems)
    hint = "" if configured_plugins() else f" ({PLUGIN_HINT})"
    raise ValueError(f"impl={name!r}: allowed values are {', '.join(known)}{failed}{hint}")


def triton_names() -> tuple[str, ...]:
    return tuple(n for n, i in registered().items() if i.triton)


def default_names() -> tuple[str, ...]:
    return tuple(n for n, i in registered().items() if i.default)


def stored_dtype(name: str, dtype: str, asked: str | None = None) -> str:
    """The dtype S and P are stored in at input ``dtype`` (``asked``: the point's sp_dtype)."""
    return asked or get(name).sp_dtype or dtype


def describe(name: str) -> dict[str, Any]:
    """The facts a record carries, so that tables and reports need no catalog."""
    entry = get(name)
    facts = ("stores", "triton", "twin", "origin", "tile_local", "softmax_dtype")
    return {fact: getattr(entry, fact) for fact in facts}


def triton_path(stores: str, split_keys: bool = False) -> str:
    """Our exact Triton path that stores ``stores`` (SP, S or none): the materialized, S-only
    and fused designs a prediction compares, and what a PyTorch or plugin path of that kind
    is costed as on a GPU; ``split_keys``: the fused design whose programs split the keys
    (decode's)."""
    for name, entry in registered().items():
        if (
            entry.ours
            and entry.triton
            and not entry.tile_local
            and entry.stores == stores
            and entry.split_keys == split_keys
        ):
            return name
    raise ValueError(f"stores={stores!r}: none of our Triton paths stores that; allowed: {', '.join(STORES)}")


def backward_names() -> tuple[str, ...]:
    """The implementations a gradient can be taken through."""
    return tuple(n for n, i in registered().items() if i.backward is not None)


__all__ = [
    "ENTRY_POINT_GROUP",
    "Implementation",
    "PluginError",
    "Problem",
    "get",
    "implementation",
    "load",
    "names",
    "problems",
    "use_plugins",
]
