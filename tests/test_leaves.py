"""The study's leaves (kernels.planning.leaves): what each file's name says it holds, the kind
each is checked as, and which of them are damaged; plain Python, no Snakemake run (the workflow's
own use of them is tested on the shared study: tests/test_workflow_copies.py)."""

import json
from dataclasses import replace

from kernels.io.records import table_schemas
from kernels.planning.leaves import (
    build_points_of,
    damaged_leaves,
    record_fields,
    table_kind,
    verdict_fields,
)
from kernels.planning.point import Point

FLASH = Point("triton_flash", 1, 1, 16, 16, "float16", False, 16, 32)
FLASH_T100 = Point("triton_flash", 1, 1, 100, 16, "float16", False, 16, 32)  # built by FLASH's job
FLASH_D32 = Point("triton_flash", 1, 1, 16, 32, "float16", False, 16, 32)  # by another


def test_a_leafs_name_says_what_it_holds():
    assert record_fields(FLASH) == {
        "impl": "triton_flash",
        **FLASH.shape(),
        "inputs": "normal",
        "pass": "forward",
    }
    assert verdict_fields(FLASH) == {"impl": "triton_flash", "dtype": "float16", "block_m": 16, "block_n": 32}


def test_a_build_result_names_only_its_own_jobs_points():
    strays = build_points_of(FLASH.build_name)
    assert strays({"points": [FLASH.name, FLASH_T100.name]}) is None  # one job for every T
    said = strays({"points": [FLASH.name, FLASH_D32.name]})
    assert said == f"names the point {FLASH_D32.name}, which is not built by {FLASH.build_name}"
    said = strays({"points": ["not a point"]})
    assert said == f"names the point not a point, which is not built by {FLASH.build_name}"


def test_each_table_is_checked_as_its_kind():
    schema_table = next(iter(table_schemas()["tables"]))
    assert table_kind(f"results/model/{schema_table}") == "table"
    assert table_kind("results/env.json") == "env"
    assert table_kind("results/ceilings.json") == "ceilings"
    assert table_kind("results/model/softmax_example.json") == "softmax_example"
    assert table_kind("results/other.json") is None
    assert table_kind("results/metrics.parquet") == "sealed"
    assert table_kind("results/stage_times.csv") == "sealed"
    assert table_kind("results/notes.txt") is None


def test_damage_is_named_and_a_missing_or_unchecked_file_is_none(tmp_path):
    good, cut, record, unchecked = (tmp_path / n for n in ("good.html", "cut.html", "r.json", "x.json"))
    good.write_text("<html><body>page</body></html>\n")
    cut.write_text("<html><body>pa")
    record.write_text("{not json")
    unchecked.write_text("anything")
    files = {
        str(good): ("page", None),
        str(cut): ("page", None),
        str(record): ("record", record_fields(FLASH)),
        str(unchecked): (None, None),
        str(tmp_path / "missing.json"): ("record", None),
    }
    found = damaged_leaves(files)
    assert set(found) == {str(cut), str(record)}
    assert found[str(cut)] == f"{cut}: does not end its HTML document (cut short?)"
    assert found[str(record)].startswith(f"{record}: ")


def test_a_record_without_a_pass_is_a_forward_one():
    from kernels.io.records import _disagreement

    backward = record_fields(replace(FLASH, direction="backward"))
    assert (
        _disagreement({**FLASH.shape(), "impl": "triton_flash", "inputs": "normal"}, record_fields(FLASH))
        is None
    )
    said = _disagreement({**FLASH.shape(), "impl": "triton_flash", "inputs": "normal"}, backward)
    assert said == "says pass='forward', but its file name says pass='backward'"


def test_a_record_that_disagrees_with_its_name_is_damaged(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"impl": "sdpa"}))
    found = damaged_leaves({str(path): ("record", record_fields(FLASH))})
    assert str(path) in found
