"""Every study renders every page and the index, whatever it holds: no Triton point, no timed
point, only skipped points, one point. Each study's results are written here from records
measured on the spot and the model's own tables; the notebooks run as a kernel runs them,
without torch (tests/page_renderer.py), each page's outputs are read back, and a page with
nothing to show says what it would show and why."""

from __future__ import annotations

import copy
import html
import json
import re
import shutil
from collections import namedtuple
from pathlib import Path

import pandas as pd
import pytest
from modelled_study import write_index, write_results
from page_renderer import TEMPLATES, render_in_a_kernel

ROOT = Path(__file__).resolve().parents[1]
NOTHING = "Nothing to show here"  # how a section starts when the study has nothing for it


# --- the tests ---------------------------------------------------------------------------------

SMALL = {"batch": [1], "heads": [1], "total_tokens": None, "head_dim": [16], "inputs": ["normal"]}


def grid(impls, tokens, dtype="float32", causal=(False,), blocks=((16, 16),)) -> dict:
    return SMALL | {
        "impls": list(impls),
        "tokens": list(tokens),
        "dtype": [dtype],
        "causal": list(causal),
        "blocks": [list(b) for b in blocks],
    }


# a validation result that fails: the points of its implementation are skipped, naming it
FAILED_VALIDATION = [
    {"as_expected": False, "tokens": 16, "head_dim": 16, "causal": False, "verdict": "fail"}
    | {"message": "a test's own failure"}
]
# name → (sweep, the validation results its points are measured with)
STUDIES = {
    # no Triton point: the Build page has no kernel; nothing counted, no fused pair
    "torch_only": ([grid(["torch_naive", "sdpa"], [16])], None),
    # Triton points only, on a CPU: run under the interpreter, never timed
    "untimed": ([grid(["triton_naive", "triton_flash"], [16])], None),
    # nothing ran: every point skipped (its validation failed)
    "skipped_only": ([grid(["torch_naive", "triton_flash"], [16])], FAILED_VALIDATION),
    # one point
    "one_point": ([grid(["torch_naive"], [16])], None),
}
TILE_ERRORS = [
    {
        "impl": impl,
        "tokens": tokens,
        "block_m": 16,
        "block_n": block_n,
        "head_dim": 32,
        "dtype": "float32",
        "causal": True,
        "error": error * (1 if impl == "triton_tile_softmax" else 1e-6),
    }
    for impl in ("triton_tile_softmax", "triton_flash")
    for tokens, error in ((16, 0.0), (64, 0.25))
    for block_n in (16, 32)
]


def write_study(
    results: Path, sweep: list[dict], validation: list[dict] | None, measured: dict | None = None
) -> pd.DataFrame:
    """results/ as the workflow would leave it for this sweep, minus the reports: the
    records measured here (a point another study measured with the same validation
    results is not measured again: ``measured`` keeps them), the model's tables,
    provenance, ceilings, no build."""
    from kernels.measure.run import measure
    from kernels.measure.timing import Windows, windows
    from kernels.planning.sweep import points

    measured = {} if measured is None else measured
    records = []
    for point in points(sweep):
        key = (point, json.dumps(validation))
        if key not in measured:
            # the ci preset's windows: the pages need times, not stable ones
            with windows(Windows(cpu_seconds=0.3, stage_seconds=0.1)):
                measured[key] = measure(point, "cpu", seed=0, validation=validation)
        records.append(copy.deepcopy(measured[key]))
    ceilings = {"device": "cpu", "device_name": "test CPU", "threads": 2, "copy_gbps": 10.0}
    ceilings |= {"matmul_tflops": 0.05, "matmul_dtype": "float32", "call_us": None}
    ceilings["levels"] = [{"level": "DRAM", "bytes": None, "footprint_bytes": 1 << 28, "copy_gbps": 10.0}]
    # no exponentials' rate in these ceilings: the GPUs' rows only, as where ceilings lack one
    ceilings |= {"exp_per_s": None, "exp_reason": "not measured for this test"}
    return write_results(results, sweep, records, ceilings, TILE_ERRORS)


Study = namedtuple("Study", "metrics pages index results")
GARBAGE = "garbage_env"  # one_point's results with results/env.json that is not JSON


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    """name → Study: its metrics, {page: outputs and error}, the index's HTML (None where
    the index is not rendered) and its results folder. Slow (about 7 s of CPU a study): each
    page runs and draws its figures, once for the module."""
    base = tmp_path_factory.mktemp("studies")
    metrics, measured = {}, {}
    for name, (sweep, validation) in STUDIES.items():
        metrics[name] = write_study(base / name / "results", sweep, validation, measured)
    shutil.copytree(base / "one_point", base / GARBAGE)
    (base / GARBAGE / "results" / "env.json").write_text("garbage{\n")
    metrics[GARBAGE] = metrics["one_point"]
    names = [*STUDIES, GARBAGE]
    rendered = render_in_a_kernel([base / name for name in names])
    out = {}
    for name in names:
        results = base / name / "results"
        if name in STUDIES:
            write_index(results, TEMPLATES)
        pages = rendered[base / name]
        page = results / "index.html"
        out[name] = Study(metrics[name], pages, page.read_text() if page.exists() else None, results)
    return out


def said(page: dict) -> str:
    """Everything a page showed, as text (markdown, HTML and plain outputs)."""
    return "\n".join(text for output in page["outputs"] for text in output.values())


def sentences(page: dict) -> list[str]:
    """The page's sentences for sections it has nothing to show in."""
    return [
        o["text/markdown"] for o in page["outputs"] if o.get("text/markdown", "").startswith(f"**{NOTHING}")
    ]


def tables(page: dict) -> list[list[str]]:
    """The cells of each table the page shows (not figures, not scripts)."""
    return [
        re.findall(r"<t[hd][^>]*>([^<]*)</t[hd]>", o["text/html"])
        for o in page["outputs"]
        if "<table" in o.get("text/html", "")
    ]


@pytest.mark.parametrize("name", STUDIES)
def test_every_page_and_the_index_render(rendered, name):
    """No page fails, each shows something, and each section with nothing to show says what
    it would show and why, in one sentence; the index lists every point."""
    metrics, pages, index, _ = rendered[name]
    assert set(pages) == {t.stem for t in TEMPLATES}
    for page, result in pages.items():
        assert result["error"] is None, f"{name}: {page}: {result['error']}"
        assert result["outputs"], f"{name}: {page} shows nothing"
        for sentence in sentences(result):
            assert re.fullmatch(rf"\*\*{NOTHING}:\*\* this section would show [^;]+; .+\.", sentence, re.S)
    assert "<h1>" in index and index.count("<tr class=") == len(metrics)


def test_a_study_without_a_triton_point_says_why_its_build_page_is_empty(rendered):
    metrics, pages, _, _ = rendered["torch_only"]
    why = (
        f"this study has no Triton point (its implementations: {' and '.join(sorted(set(metrics['impl'])))})"
    )
    build = sentences(pages["build"])
    assert len(build) == 4 and all(why in s for s in build)  # resources, tensor cores, candidates, mix
    assert not tables(pages["build"])  # no empty table in their place
    assert f"No Triton kernel was built: {why}" in said(pages["build"])  # and so does its summary
    assert any(why in s for s in sentences(pages["traffic"]))  # nothing counted, nothing by stage


def test_a_study_without_a_timed_point_says_why_in_each_performance_section(rendered):
    metrics, pages, _, _ = rendered["untimed"]
    (reason,) = set(metrics["time_reason"])
    why = f"no point of this study was timed ({' and '.join(sorted(set(metrics['impl'])))}: "
    why += reason.removeprefix("not timed: ") + ")"
    performance = sentences(pages["performance"])
    # headline, time figures, speed-ups, fastest SDPA, bandwidth, roofline
    assert len(performance) == 7 and all(why in s for s in performance)


def test_a_study_where_nothing_ran_links_the_index_warnings_instead_of_repeating_them(rendered):
    metrics, pages, index, _ = rendered["skipped_only"]
    assert set(metrics["status"]) == {"skipped"}
    (reason,) = set(metrics["reason"])
    assert "id='warnings'" in index and html.escape(reason) in index
    for name, page in pages.items():
        text = said(page)
        assert reason not in text, f"{name} repeats the index's warnings"
        summary = next(
            o["text/markdown"] for o in page["outputs"] if "**Run:**" in o.get("text/markdown", "")
        )
        assert f"{len(metrics)} of {len(metrics)} did not ({len(metrics)} skipped)" in summary
        assert "[the index's warnings](../index.html#warnings)" in summary
    nothing_ran = f"no point of this study ran ({len(metrics)} skipped; [the index's warnings]"
    assert len(sentences(pages["performance"])) == 7
    assert all(nothing_ran in s for s in sentences(pages["performance"]))
    assert any(nothing_ran in s for s in sentences(pages["storage"]))


def test_a_study_of_one_point(rendered):
    metrics, pages, _, _ = rendered["one_point"]
    (impl,) = set(metrics["impl"])
    assert "1 point: 1 ok." in said(pages["storage"])
    fusing = [s for s in sentences(pages["performance"]) if "the speed-up from fusing" in s]
    assert (
        len(fusing) == 1 and "this study timed no fused implementation beside its materialized" in fusing[0]
    )
    assert f"(timed: {impl} in float32)" in fusing[0]


def test_tables_print_numbers_for_people(rendered):
    """No table of any page prints pandas' six decimals; the GPU table gives the vendors'
    figures as written (2.039 TB/s, 40 MiB)."""
    for name in STUDIES:
        for page, result in rendered[name].pages.items():
            for cells in tables(result):
                assert not [c for c in cells if re.search(r"\d\.\d{6}", c)], f"{name}: {page}: {cells}"
    from reports.pages.common import number

    study = rendered["one_point"]
    gpus = pd.read_csv(study.results / "model" / "gpus.csv")
    shown = tables(study.pages["predicted"])[0]
    for row in gpus.itertuples():
        assert {number(row.hbm_bytes_per_s / 1e12, 4), number(row.l2_bytes / 2**20, 4)} <= set(shown)


def test_an_unusable_input_stops_every_page_naming_the_file_and_why(rendered):
    """results/env.json that is not JSON: each page stops at its load with one line naming
    the file, what it holds and what is wrong, and shows no traceback."""
    pages = rendered[GARBAGE].pages
    for name, page in pages.items():
        error = page["error"]
        assert error and error["type"] == "InputError", name
        assert error["message"].startswith("results/env.json (the run's provenance")
        assert "is not valid JSON" in error["message"]
        shown = re.sub(r"\x1b\[[0-9;]*m", "", error["shown"]).strip()
        assert shown == f"InputError: {error['message']}", shown


def test_the_loader_names_the_file_and_the_reason(tmp_path):
    from reports.pages.inputs import InputError, read

    cases = {
        "missing.csv": (None, "sizes", "does not exist"),
        "empty.csv": ("", "sizes", "is empty"),
        "garbage.csv": ('a,b\n1,"2\n', "sizes", "is not a CSV table"),
        "columns.csv": ("tokens,x\n1,2\n", "sizes", "lacks the columns dtype, element_bytes, bytes"),
        "numbers.csv": (
            "tokens,dtype,element_bytes,bytes\n1,float16,2,many\n",
            "sizes",
            "column bytes holds 'many'",
        ),
        "binary.parquet": ("\x00\x01 not parquet", "metrics", "cannot be read as a Parquet table"),
        "list.json": ("[1]", "env", "holds a list, not an object"),
        "object.json": ('{"x": 1}', "env", "lacks the key device"),
        "cut.json": ('{"device": "cpu"', "env", "is not valid JSON (cut short?)"),
        "verdicts.json": ('{"verdict": "pass"}', "validation", "holds an object, not a list"),
        "table.json": ("{}", "sizes", "should be a table"),
    }
    for file, (text, name, reason) in cases.items():
        path = tmp_path / file
        if text is not None:
            path.write_text(text)
        with pytest.raises(InputError) as err:
            read(name, path)
        assert str(err.value).startswith(f"{path} (") and reason in str(err.value), str(err.value)
    (tmp_path / "stages.csv").write_text("\n")  # a study whose points were all skipped has no stage
    assert read("stages", tmp_path / "stages.csv").empty
