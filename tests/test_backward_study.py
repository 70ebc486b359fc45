"""The backward as a sweep point (issue 35): its name and command line, its refusals, its
record against the schema and the models, the tables split by pass, the models' crossing and
training shape, and the Training page's sentences held to the tables they come from."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from modelled_study import training_shape, write_study
from snakemake.utils import validate
from workflow_run import ROOT

from kernels.cli import build_parser
from kernels.io.records import validate_record
from kernels.io.tables import write_tables
from kernels.measure.run import measure
from kernels.measure.timing import Windows, windows
from kernels.models import backward_predictions as bp
from kernels.models.backward_cost import kept_bytes
from kernels.models.stage_predictions import machines
from kernels.planning.gpus import GPUS
from kernels.planning.point import Point
from reports.pages import training
from reports.pages.common import number

GIB = 2**30
SCHEMA = str(ROOT / "workflow" / "schemas" / "config.schema.yaml")
QUICK = Windows(cpu_seconds=0.3, stage_seconds=0.1)  # config/presets/ci.yaml's timing


def _point(impl: str, tokens: int = 48, dtype: str = "float32", **options) -> Point:
    blocks = (16, 16) if impl.startswith("triton") else (None, None)
    return Point(impl, 1, 2, tokens, 16, dtype, True, *blocks, direction="backward", **options)


# --- the point ------------------------------------------------------------------------------


def test_a_backward_point_reads_back_from_its_name_and_its_command_line():
    point = _point("triton_naive")
    assert point.name.endswith("-normal-backward") and Point.from_name(point.name) == point
    forward = point.forward()
    assert not forward.backward and not forward.name.endswith("backward")
    assert Point.from_name(forward.name) == forward  # the forward's names are unchanged
    args = build_parser().parse_args(["measure", *point.cli_args(), "--out", "x.json"])
    assert Point.from_cli(args) == point


def test_an_unknown_pass_is_refused_naming_the_field_and_what_is_allowed():
    with pytest.raises(ValueError, match=r"pass='sideways': allowed values are forward, backward"):
        Point("torch_naive", 1, 1, 64, 16, "float32", True, direction="sideways")
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["sweep"] = {"pass": ["sideways"]}
    with pytest.raises(Exception, match="sideways"):
        validate(config, SCHEMA)


# --- the record -----------------------------------------------------------------------------


def test_a_path_without_a_backward_is_a_skipped_record_naming_why():
    record = measure(_point("triton_tile_softmax", dtype="float16"), "cpu", use_ncu=False)
    validate_record(record)
    assert record["status"] == "skipped" and record["reason"].startswith("no backward: ")
    assert record["pass"] == "backward"


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    """The backward of the torch path (timed, staged) and of the fused kernel (interpreted,
    counted) at an odd T, and the torch path's forward beside them. Timed within the ci
    preset's windows: these tests ask that the times exist, not that they are stable."""
    with windows(QUICK):
        found = {
            impl: measure(_point(impl, tokens=47, dtype=dtype), "cpu", use_ncu=False)
            for impl, dtype in (("torch_naive", "float32"), ("triton_flash", "float16"))
        }
        found["forward"] = measure(_point("torch_naive", tokens=47).forward(), "cpu", use_ncu=False)
    return found


def test_a_backward_record_holds_the_schema_and_keeps_what_its_model_says(records):
    for record in records.values():
        validate_record(record)
        assert record["status"] == "ok", record["reason"]
    for impl, dtype in (("torch_naive", "float32"), ("triton_flash", "float16")):
        record, model = records[impl], kept_bytes(_point(impl, 47, dtype))
        assert record["saved_bytes"] == record["saved_model_bytes"] == sum(model.values())
        assert set(record["gradient_errors"]) == {"dQ", "dK", "dV"}
    assert max(records["torch_naive"]["gradient_errors"].values()) < 1e-5
    assert max(records["triton_flash"]["gradient_errors"].values()) < 1e-2  # float16


def test_the_interpreted_backward_is_counted_at_its_model_and_never_timed(records):
    flash = records["triton_flash"]
    assert flash["traffic_counted_bytes"] == flash["traffic_model_bytes"] > 0
    assert flash["time_ms"] is None and "interpreter" in flash["time_reason"]
    assert flash["flops"] > flash["forward_flops"]  # dV, dP, dS, dQ, dK and the recomputed S


def test_the_torch_backward_is_timed_alone_and_with_its_forward_stage_by_stage(records):
    record = records["torch_naive"]
    assert record["time_ms"] > 0 and record["step_time_ms"] > 0 and record["step_repeats"] >= 1
    assert [s["stage"] for s in record["stage_times"]] == ["dp", "ds", "dv", "dq", "dk"]
    assert all(s["time_ms"] > 0 and s["cold_time_ms"] > 0 for s in record["stage_times"])


def read_table(path: Path) -> pd.DataFrame:
    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)


def test_the_tables_split_the_records_by_pass(records, tmp_path):
    paths = [tmp_path / f for f in ("m.parquet", "m.csv", "s.csv", "t.csv")]
    backward = tuple(tmp_path / f for f in ("b.csv", "bs.csv", "bt.csv"))
    metrics = write_tables(list(records.values()), *paths, backward=backward)
    assert list(metrics["pass"]) == ["forward"]
    table = pd.read_csv(backward[0])
    assert sorted(table["impl"]) == ["torch_naive", "triton_flash"] and set(table["pass"]) == {"backward"}
    assert set(pd.read_csv(backward[2])["stage"]) >= {"dp", "ds", "dv", "dq", "dk"}
    write_tables([records["forward"]], *paths, backward=backward)  # no backward point
    assert pd.read_csv(backward[0]).empty and "impl" in pd.read_csv(backward[0]).columns
    # no forward point: each forward table is empty but has the columns of a full one (less
    # those flattened from a record's versions, process and contention)
    full = {path: read_table(path) for path in paths}
    write_tables([records["torch_naive"], records["triton_flash"]], *paths, backward=backward)
    for path, table in full.items():
        flattened = {c for c in table if c.startswith(("version_", "process_", "contention_"))}
        assert read_table(path).empty and set(table.columns) - flattened <= set(read_table(path).columns)
    assert len(pd.read_csv(backward[0])) == 2


# --- the models -----------------------------------------------------------------------------


def test_the_crossing_is_the_shortest_t_from_which_recomputing_is_never_slower():
    tokens = (128, 256, 512, 1024)
    assert bp.crossing([5, 5, 5, 5], [6, 4, 4, 4], tokens) == 256
    assert bp.crossing([5, 5, 5, 5], [4, 6, 4, 4], tokens) == 512  # a loss in between resets it
    assert bp.crossing([5, 5, 5, 5], [4, 4, 4, 6], tokens) is None
    assert bp.crossing([1, 1, 1, 1], [1, 1, 1, 1], tokens) == 128  # a tie is not slower


def test_the_crossing_rows_hold_their_own_crossing():
    gpus, _ = machines(None)
    shape = (64, "float16", True, 64, 64)
    rows = pd.DataFrame(bp.crossing_rows([shape], gpus[:1]))
    assert set(rows["tokens"]) == set(bp.CROSSING_TOKENS)
    for _, curve in rows.groupby("case"):
        found = bp.crossing(list(curve["stored_ms"]), list(curve["recomputed_ms"]), list(curve["tokens"]))
        said = curve["crossing_tokens"]
        assert said.isna().all() if found is None else (said == found).all()
        assert (curve["recomputed_flops"] > curve["stored_flops"]).all()  # the extra products
        assert (curve["recomputed_bytes"] < curve["stored_bytes"]).all()


OTHER_SHAPE = {"tokens": 3000, "heads": 8, "layers": 12, "dtype": "float32", "causal": False}


@pytest.mark.parametrize("shape", [{}, OTHER_SHAPE])
def test_the_training_shape_scales_what_one_layer_keeps(shape):
    config = training_shape() | shape
    gpus, _ = machines(None)
    rows = pd.DataFrame(bp.training_rows(config, gpus)).drop_duplicates("impl").set_index("impl")
    assert list(rows.index) == list(bp.training_paths())
    for impl, row in rows.iterrows():
        kept = kept_bytes(bp.training_point(config, impl))
        assert row["kept_layer_bytes"] == sum(kept.values())
        assert row["kept_model_bytes"] == row["kept_layer_bytes"] * config["layers"]
    B, H, T = config["batch"], config["heads"], config["tokens"]
    sp = bp.training_point(config, "triton_naive").e_sp
    assert rows.loc["triton_naive", "kept_matrix_layer_bytes"] == B * H * T * T * sp
    assert rows.loc["triton_flash", "kept_matrix_layer_bytes"] == 0
    assert rows.loc["triton_flash", "backward_matrix_layer_bytes"] == 0  # P recomputed in registers


# --- the page -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A backward study the default one does not plan: d = 32, T = 96 and 160, float32."""
    results = tmp_path_factory.mktemp("backward") / "results"
    grid = {"impls": ["torch_naive", "triton_naive", "triton_s_only", "triton_flash", "triton_tile_softmax"]}
    grid |= {"tokens": [96, 160], "head_dim": [32], "dtype": ["float32"], "causal": [True]}
    grid |= {"blocks": [[32, 32]], "pass": ["backward"]}
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text()) | {"sweep": [grid]}
    validate(config, SCHEMA)  # the schema's defaults for the keys left out
    write_study(results, config["sweep"], 32 * 2**20)
    model = results / "model"
    return {
        "backward": pd.read_csv(results / "backward.csv"),
        "training": pd.read_csv(model / "training_memory.csv"),
        "crossing": pd.read_csv(model / "recompute_crossing.csv"),
    }


def test_the_pages_sentences_come_from_the_tables(study):
    backward, trained, crossing = study["backward"], study["training"], study["crossing"]
    kept = training.kept_finding(backward)
    ran = backward[backward["status"] == "ok"]
    assert f"equal the model's at {len(ran)} of the {len(ran)} points" in kept
    longest = ran[ran["tokens"] == 160].sort_values("saved_bytes")
    assert f"{longest.iloc[-1]['impl']} keeps {number(longest.iloc[-1]['saved_bytes'] / 2**20)} MiB" in kept
    shape = training.training_finding(trained)
    for impl, row in trained.drop_duplicates("impl").set_index("impl").iterrows():
        assert f"{impl} {number(row['kept_layer_bytes'] / GIB)} GiB per layer" in shape
    naive = trained[trained["impl"] == "triton_naive"]
    over = naive[naive["kept_model_bytes"] > naive["memory_bytes"]]
    for target in over["target"]:
        assert target in shape.split("triton_naive", 1)[1].split(";")[0]
    line = training.finding(backward, trained, crossing)
    stored = trained[trained["impl"] == "triton_naive"]["kept_model_bytes"].iloc[0]
    assert f"storing P keeps {number(stored / GIB)} GiB" in line
    cold = crossing[crossing["case"] == "cold"]
    for gpu in GPUS.values():
        first = cold[cold["target"] == gpu.name]["crossing_tokens"].min()
        said = f"on {gpu.name} from T = {int(first):,}" if pd.notna(first) else f"never on {gpu.name}"
        assert said in line


def test_a_study_without_a_backward_point_says_so_on_the_page(study):
    none = study["backward"].iloc[0:0]
    why = "this study has no backward point (sweep.pass: [backward] adds them)"
    assert why in training.kept_finding(none)
    assert training.finding(none, study["training"], study["crossing"]) is None
