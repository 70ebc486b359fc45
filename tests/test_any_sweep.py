"""Any sweep the config schema accepts makes every table, every page and the index (issue
64): twice a class of accepted sweeps killed the table writers (backward points only, then no
square point), so the sweeps here are drawn from the schema itself rather than listed.

Each drawn sweep (hypothesis-jsonschema, from workflow/schemas/config.schema.yaml's grid with
its sizes made small) is planned as workflow/rules/common.smk plans it, gets the package's
own record of every point on tests/modelled_study.py's made-up machine, and every table the
collect, model, predict, predict_stages and backward_model rules write, each read back
through its schema and seal. A few of them, and the issue's two cases, are then rendered:
every page and the index, each empty section saying why. Plugins with and without models
are among the implementations drawn. Many sweeps through the tables, a few through the pages:
about 25 s of one core in all (over 5 s: the point of the file is breadth; Hypothesis
derandomized, so the same sweeps on every run)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from modelled_study import write_index, write_study
from page_renderer import TEMPLATES, render_in_a_kernel

from kernels import catalog
from kernels.io.records import read_leaf, table_schemas
from kernels.planning.point import Point
from kernels.planning.sweep import (
    build_jobs,
    groups,
    parse_product_shape,
    product_shapes,
)
from kernels.planning.sweep import planned as sweep_planned
from kernels.spec import INFERENCE_DIMS

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SCHEMA = yaml.safe_load(SCHEMA_PATH.read_text())
SCHEMA_JSON = SCHEMA_PATH  # the same schema as JSON, once the module's fixture has written it
CACHE_BYTES = 64 << 10  # a small cache: tokens_across_cache gives T of tens
MOST_POINTS = 24  # a drawn sweep with more points is drawn again (the tables' time grows with them)
PAGES_MOST_POINTS = 12  # and for the pages
DRAWN_PAGES = 1  # drawn sweeps rendered, beside the two
NOTHING = "**Nothing to show here:**"
# a mask of each kind at the small grid's lengths (the schema takes any string kernels.masks reads)
SMALL_MASKS = ["full", "causal", "window:5", "documents:16", "documents-full:9", "prefix:7"]
PLUGINS = ("any_plain", "any_chunked", "any_fused")


def _softmax_attention(q, k, v, causal):  # never called: the records are modelled
    raise AssertionError("a modelled study runs no implementation")


def register_plugins() -> None:
    """Three plugins' implementations, registered as a plugin module's import registers them
    (as if the config's plugins named it): one with no
    model at all, one materialized a chunk of rows at a time, one fused Triton path with every
    model (our fused path's), taking both inference dimensions and a backward."""

    @catalog.implementation("any_plain", stores="none")
    def any_plain(q, k, v, *, causal):
        return _softmax_attention(q, k, v, causal)

    @catalog.implementation("any_chunked", stores="SP", stored_rows=16, takes=INFERENCE_DIMS)
    def any_chunked(q, k, v, *, causal):
        return _softmax_attention(q, k, v, causal)

    flash = "kernels.paths.triton_flash"

    @catalog.implementation(
        "any_fused",
        stores="none",
        triton=True,
        twin="triton_naive",
        takes=INFERENCE_DIMS,
        traffic_model=f"{flash}.model:as_issued_fused",
        launches=f"{flash}.forward:planned_launches",
        programs_model=f"{flash}.model:programs",
        backward=f"{flash}.backward",
        backward_traffic_model=f"{flash}.backward_model:as_issued_flash_backward",
        kept_model=f"{flash}.model:kept",
        backward_flops_model=f"{flash}.backward_model:flops_flash_backward",
        backward_stage_model=f"{flash}.backward_model:backward_stage_costs",
    )
    def any_fused(q, k, v, *, causal, block_m, block_n):
        return _softmax_attention(q, k, v, causal)


@pytest.fixture(scope="module", autouse=True)
def plugins_and_schema(tmp_path_factory):
    """The plugins registered for this module only (the catalog is restored after it), and
    the config schema as JSON, which Snakemake's validate reads a hundred times faster."""
    global SCHEMA_JSON
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(catalog, "_registered", dict(catalog._registered))
        register_plugins()
        assert set(PLUGINS) <= set(catalog.names())
        SCHEMA_JSON = tmp_path_factory.mktemp("schema") / "config.schema.json"
        SCHEMA_JSON.write_text(json.dumps(SCHEMA))
        yield


def small_grid(impls: list[str]) -> dict:
    """The config schema's grid with every list short and every size small (T up to 80, H up
    to 4, d 16 or 32, blocks of 16 or 32), and the implementations ``impls``: a subset of what
    the schema accepts, so every grid drawn from it is one the schema accepts."""
    grid = copy.deepcopy(SCHEMA["$defs"]["grid"])
    props = grid["properties"]
    for prop in props.values():
        if prop.get("type") == "array":
            prop["maxItems"] = 2
    props["impls"]["items"] = {"enum": impls}
    grid["required"] = ["impls", "tokens"]  # not the defaults: six implementations, T to 4,096
    props["batch"]["items"] |= {"maximum": 2}
    props["heads"]["items"] = {"enum": [1, 2, 4]}
    props["kv_heads"]["items"] = {"enum": [None, 1, 2]}
    props["query_tokens"]["items"] |= {"maximum": 20}
    props["tokens"]["items"] |= {"maximum": 80}
    props["total_tokens"] |= {"maximum": 160}
    span = props["tokens_across_cache"]["properties"]
    span["from"] |= {"minimum": 0.25, "maximum": 2}
    span["to"] |= {"minimum": 0.25, "maximum": 3}
    span["step"] |= {"minimum": 1.3}
    props["head_dim"]["items"] = {"enum": [16, 32]}
    props["mask"]["items"] = {"enum": SMALL_MASKS}
    props["blocks"]["items"]["items"] = {"enum": [16, 32]}
    return grid


def validated(config: dict) -> dict:
    """The config as Snakemake reads it: checked against the schema, its defaults filled in."""
    from snakemake.utils import validate

    config = copy.deepcopy(config)
    validate(config, str(SCHEMA_JSON))
    return config


# planning's refusals of a sweep the schema lets through: each names its field
REFUSALS = re.compile(
    r"(kv_heads|query_tokens)=\d+: |tokens_across_cache( with fills: kv needs one|: )"
    r"|mask '|causal .* and mask .* both"
)


def planned(config: dict) -> tuple[list[dict], list[Point]] | None:
    """The sweep planned as workflow/rules/common.smk plans it (its grids resolved against the
    cache, every implementation registered, the points, their names read back, the ceilings'
    product shapes, the build jobs, the record groups): its grids and points; None where
    planning refuses it, naming the field (a grid whose kv_heads does not divide its heads)."""
    config = validated(config | {"cache_bytes": CACHE_BYTES})
    try:
        sweep, left_out, found = sweep_planned(config["sweep"], CACHE_BYTES)
    except ValueError as err:
        assert REFUSALS.search(str(err)), f"planning refused without naming the field: {err}"
        return None
    assert not left_out and found
    for point in found:
        assert Point.from_name(point.name) == point, point.name
    for shape in product_shapes(found, config["device"]):
        parse_product_shape(shape)
    assert set(build_jobs(found)) <= {p.build_name for p in found if p.triton}
    assert sum(len(group) for group in groups(found).values()) == len(found)
    return sweep, found


def drawn_from(schema: dict):
    """Values of ``schema``: hypothesis-jsonschema's for every value but an object, whose keys
    are drawn here, each optional one present or not (hypothesis-jsonschema 0.23 draws an
    object through a Hypothesis internal that Hypothesis 6.170 changed)."""
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "object" not in kinds:
        return from_schema(schema)
    required = set(schema.get("required", ()))
    values = {name: drawn_from(value) for name, value in schema["properties"].items()}
    drawn = st.fixed_dictionaries(
        {k: v for k, v in values.items() if k in required},
        optional={k: v for k, v in values.items() if k not in required},
    )
    return drawn | st.none() if "null" in kinds else drawn


def configs(impls: list[str]):
    """Configs of one grid or a list of grids, drawn from the small grid schema, on a CPU or a
    machine that asked for CUDA and has none (every point skipped)."""
    grid = drawn_from(small_grid(impls))
    sweep = grid | st.lists(grid, min_size=1, max_size=2)
    return st.fixed_dictionaries({"sweep": sweep, "device": st.sampled_from(["cpu", "cuda"])})


def impls() -> list[str]:
    return sorted(catalog.names())


def study(results: Path, config: dict, most: int = MOST_POINTS) -> bool:
    """results/ of ``config``'s sweep on the made-up machine: its records and every table;
    False where planning refuses the sweep or it has more than ``most`` points."""
    plan = planned(config)
    if plan is None or len(plan[1]) > most:
        return False
    write_study(results, plan[0], CACHE_BYTES, device=config["device"])
    return True


TABLES = tuple(table_schemas()["tables"])


def check_tables(results: Path) -> None:
    """Every table the rules compute, read back through its schema and seal; the collected
    ones through their seals."""
    for name in TABLES:
        read_leaf(results / ("" if name == "tile_errors.csv" else "model") / name, "table")
    for name in ("metrics.parquet", "metrics.csv", "stages.csv", "stage_times.csv", "build.csv"):
        read_leaf(results / name, "sealed")
    for name in ("backward.csv", "backward_stages.csv", "backward_stage_times.csv"):
        read_leaf(results / name, "sealed")


# the same sweeps on every run; no deadline (a sweep's tables take from milliseconds to a
# second); a failing sweep reported as drawn, not shrunk (shrinking one took minutes)
DRAWING = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "suppress_health_check": list(HealthCheck),
    "phases": (Phase.explicit, Phase.generate),
}
DECODE_ONLY = {
    "sweep": {"impls": ["torch_naive", "triton_naive", "triton_flash"], "tokens": [48], "query_tokens": [1]}
    | {"head_dim": [16], "blocks": [[16, 16]], "pass": ["forward", "backward"]},
    "device": "cpu",
}
GROUPED_ONLY = {
    "sweep": {"impls": ["sdpa", "triton_naive"], "tokens": [32], "heads": [4], "kv_heads": [1, 2]}
    | {"head_dim": [16], "blocks": [[16, 32]], "pass": ["forward", "backward"]},
    "device": "cpu",
}
# every kind beyond causal, square and at decode, on paths that take them and one whose backward does not
MASKED = {
    "sweep": {"impls": ["sdpa", "triton_naive", "triton_flash"], "tokens": [48], "query_tokens": [None, 4]}
    | {"mask": ["window:5", "documents:16", "prefix:7"], "head_dim": [16], "blocks": [[16, 16]]}
    | {"pass": ["forward", "backward"]},
    "device": "cpu",
}


@settings(max_examples=30, **DRAWING)
@example(config=DECODE_ONLY)
@example(config=GROUPED_ONLY)
@example(config=MASKED)
@given(config=st.deferred(lambda: configs(impls())))
def test_any_sweep_the_schema_accepts_plans_and_makes_every_table(config, tmp_path_factory):
    results = tmp_path_factory.mktemp("sweep") / "results"
    assume(study(results, config))  # a sweep refused or too large is drawn again
    check_tables(results)


def shown(error: dict) -> str:
    """A page's error as the notebook showed it, without colours: its message and the end of
    its traceback."""
    return f"{error['type']}: {error['message']}\n" + re.sub(r"\x1b\[[0-9;]*m", "", error["shown"])[-3000:]


def test_a_few_drawn_sweeps_render_every_page_and_the_index(tmp_path):
    """The issue's two studies (decode points only, grouped heads only), one of masks beyond
    causal, and sweeps drawn as
    above render every page (in one kernel, without torch) and the index, each section with
    nothing to show saying what it would show and why."""
    studies: dict[Path, dict] = {}

    def add(config: dict, most: int = PAGES_MOST_POINTS) -> bool:
        folder = tmp_path / f"study{len(studies)}"
        made = study(folder / "results", config, most)
        if made:
            studies[folder] = config
        return made

    assert add(DECODE_ONLY, MOST_POINTS) and add(GROUPED_ONLY, MOST_POINTS) and add(MASKED, 2 * MOST_POINTS)

    @settings(max_examples=DRAWN_PAGES, **DRAWING)
    @given(config=st.deferred(lambda: configs(impls())))
    def drawn(config):
        assume(add(config))

    drawn()
    rendered = render_in_a_kernel(list(studies))
    for folder, config in studies.items():
        said = json.dumps(config)
        for page, result in rendered[folder].items():
            assert result["error"] is None, f"{said}: {page}: {shown(result['error'])}"
            assert result["outputs"], f"{said}: {page} shows nothing"
            for output in result["outputs"]:
                text = output.get("text/markdown", "")
                if text.startswith(NOTHING):
                    assert re.fullmatch(
                        rf"{re.escape(NOTHING)} this section would show [^;]+; .+\.", text, re.S
                    ), f"{said}: {page}: {text}"
        index = write_index(folder / "results", TEMPLATES)
        points = len(pd.read_parquet(folder / "results" / "metrics.parquet"))
        points += len(pd.read_csv(folder / "results" / "backward.csv"))
        assert "<h1>" in index and index.count("<tr class=") == points, said
