"""The project's shape: one place for every allowed value, documented configuration, imports
that run one way, a command line that answers without torch, and a Triton mode that a
laptop gets right without being told."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_run import ROOT, env, snakemake

from kernels import catalog, spec

SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())


def leaves(schema: dict, prefix: str = ""):
    """(dotted key, schema) of every configurable value."""
    for name, prop in schema["properties"].items():
        key = f"{prefix}{name}"
        if "then" in prop:  # the sweep: a grid, or a list of grids
            yield key, prop
            yield from leaves(SCHEMA["$defs"]["grid"], key + ".")
        elif prop.get("type") == "object":
            yield from leaves(prop, key + ".")
        else:
            yield key, prop


def prop(key: str) -> dict:
    return dict(leaves(SCHEMA))[key]


def test_schema_lists_are_the_allowed_values_of_the_package():
    assert prop("device")["enum"] == list(spec.DEVICES)
    assert prop("interpreter_limit")["default"] == spec.DEFAULT_INTERPRETER_LIMIT
    assert prop("build.targets")["items"]["enum"] == list(spec.GPU_TARGETS)
    assert prop("build.targets")["default"] == list(spec.DEFAULT_TARGETS)
    assert prop("sweep.impls")["items"]["pattern"] == f"^{catalog.NAME.pattern}$"
    assert prop("sweep.impls")["items"]["maxLength"] == spec.NAME_LIMIT
    assert prop("sweep.impls")["default"] == list(catalog.default_names())
    assert prop("sweep.head_dim")["items"]["enum"] == list(spec.HEAD_DIMS)
    assert prop("sweep.dtype")["items"]["enum"] == list(spec.DTYPES)
    assert prop("sweep.blocks")["items"]["items"]["enum"] == list(spec.BLOCK_SIZES)
    assert prop("sweep.blocks")["default"] == [[spec.DEFAULT_BLOCK, spec.DEFAULT_BLOCK]]
    assert prop("sweep.inputs")["items"]["enum"] == list(spec.INPUTS)
    records = json.loads((ROOT / "kernels" / "io" / "metrics.schema.json").read_text())
    assert records["properties"]["impl"]["pattern"] == f"^{catalog.NAME.pattern}$"
    assert records["properties"]["stores"]["enum"] == list(catalog.STORES)
    assert prop("sweep.inputs")["default"] == [spec.DEFAULT_INPUTS]
    assert prop("sweep.tokens")["items"]["maximum"] == spec.MAX_TOKENS
    assert prop("sweep.heads")["items"]["maximum"] == spec.MAX_GRID_YZ
    assert prop("sweep.num_splits")["items"]["maximum"] == spec.MAX_SPLITS
    assert prop("seed")["maximum"] == spec.MAX_SEED
    assert prop("limits.call_seconds")["default"] == spec.CALL_BUDGET_SECONDS
    assert prop("limits.job_seconds")["default"] == spec.JOB_LIMIT_SECONDS


def flow(value) -> str:
    """A default as the README writes it: YAML's flow style."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def readme_rows() -> dict[str, tuple[str, str]]:
    rows = {}
    for line in (ROOT / "config" / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[1].strip("`"), cells[2])
    return rows


def allowed_words(schema: dict) -> list[str]:
    """What the README's 'allowed' column must name for a key."""
    if "then" in schema:
        return ["grid", "list of grids"]
    inner = schema.get("items", schema)
    inner = inner.get("items", inner)  # blocks: pairs of enums
    if "enum" in inner:
        return [flow(v) for v in inner["enum"]]
    if inner.get("type") == "string":  # checked elsewhere: the registry, Python's import, kernels.masks
        if ":" in inner["pattern"]:
            return ["mask strings"]
        return ["names" if "a-z0-9_" in inner["pattern"] else "module names"]
    if inner.get("type") == "boolean":
        return ["true", "false"]
    if "object" in inner.get("type", []):  # tokens_across_cache: its keys, or null
        return [*inner["properties"], "null"]
    words = ["number" if inner.get("type") == "number" else "integer"]
    if "minimum" in inner:
        words.append(f"≥ {inner['minimum']}")
    if "exclusiveMinimum" in inner:
        words.append(f"> {inner['exclusiveMinimum']}")
    if "maximum" in inner:
        words.append(f"≤ {inner['maximum']:,}")
    if "null" in inner.get("type", []):
        words.append("null")
    return words


def test_config_readme_documents_every_key_with_its_default():
    rows = readme_rows()
    keys = [key for key, _ in leaves(SCHEMA)]
    assert sorted(rows) == sorted(keys), "config/README.md and the schema list different keys"
    for key, schema in leaves(SCHEMA):
        default, allowed = rows[key]
        assert default == flow(schema["default"]), key
        for word in allowed_words(schema):
            assert word in allowed, f"{key}: README's allowed values lack {word!r}"


def test_help_lists_every_command_with_defaults_and_imports_no_torch():
    from kernels.cli.commands import COMMANDS

    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kernels", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
    assert not {"torch", "triton", "numpy"} & imported
    for name in COMMANDS:
        assert re.search(rf"^  {name}: ", done.stdout, re.M), name
    assert f"--interpreter-limit={spec.DEFAULT_INTERPRETER_LIMIT}" in done.stdout


PLANNING_IMPORT = re.compile(r"^\s*(?:from|import)\s+(kernels[\w.]*)", re.M)


def test_workflow_plans_with_planning_the_models_and_spec_only():
    files = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    found = {m for f in files for m in PLANNING_IMPORT.findall(f.read_text())}
    # kernels.io.records: a damaged record is named and remade at planning time (jsonschema only);
    # kernels.warm.session: the run's warm workers, begun and ended by the hooks (standard library);
    # kernels.io.run_summary: the run's closing lines (the records, standard library);
    # kernels.warm.stop: a SIGTERM to the run ends its running jobs (standard library);
    # kernels.io.benchmarks: the study's benchmark records, listed for the index (standard library)
    allowed = (
        "kernels.spec",
        "kernels.planning",
        "kernels.models",
        "kernels.io.records",
        "kernels.io.run_summary",
        "kernels.io.benchmarks",
        "kernels.catalog",
        "kernels.warm.session",
        "kernels.warm.stop",
    )
    assert found and all(
        m in allowed or m.startswith(("kernels.planning.", "kernels.models.")) for m in found
    ), found
    assert not re.search(r"sys\.path|PYTHONPATH", "".join(f.read_text() for f in files))


def test_planning_a_sweep_needs_no_torch(tmp_path, no_torch):
    config = str(ROOT / "config" / "config.yaml")
    done = snakemake(tmp_path, "-n", "--cores", "1", "--configfile", config, environment=no_torch)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"^measure\s+\d+$", done.stdout, re.M)


def test_the_import_contracts_catch_a_wrong_import(tmp_path):
    """lint-imports is real: a report module importing the implementations breaks it."""
    copy = tmp_path / "tree"
    for part in ("kernels", "reports"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())

    def lint_imports() -> subprocess.CompletedProcess:
        lint = Path(sys.executable).parent / "lint-imports"
        return subprocess.run(
            [str(lint)],
            capture_output=True,
            text=True,
            cwd=copy,
            timeout=120,
            env=env() | {"PYTHONPATH": str(copy)},
        )

    clean = lint_imports()
    assert clean.returncode == 0, clean.stdout[-2000:]
    page = copy / "reports" / "pages" / "storage.py"
    page.write_text(page.read_text() + "\nimport kernels.impl.registry\n")
    broken = lint_imports()
    assert broken.returncode != 0 and "reports.pages.storage -> kernels.impl.registry" in broken.stdout


# --- the Triton mode a laptop gets -----------------------------------------------------------


def run_flash(extra_env: dict) -> subprocess.CompletedProcess:
    code = (
        "import torch, kernels; from kernels.impl import mode\n"
        "q = torch.randn(1, 1, 8, 16)\n"
        "out = kernels.attention(q, q, q, impl='triton_flash', causal=True)\n"
        "print('interpret', mode.interpret(), float(out.abs().sum()) > 0)"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("ATTNIO_INTERPRET", "TRITON_INTERPRET")}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean | extra_env, timeout=300
    )


def test_no_switch_and_no_gpu_means_the_interpreter():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = run_flash({})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "interpret True True" in done.stdout


@pytest.mark.parametrize(
    "switches, works",
    [
        ({"TRITON_INTERPRET": "1"}, True),  # Triton's own switch is honoured
        ({"TRITON_INTERPRET": "0"}, False),  # compiled, so CPU tensors are refused
        ({"ATTNIO_INTERPRET": "0", "TRITON_INTERPRET": "1"}, False),  # attnio's switch wins
        ({"ATTNIO_INTERPRET": "1", "TRITON_INTERPRET": "0"}, True),
    ],
)
def test_switches_in_order(switches, works):
    done = run_flash(switches)
    if works:
        assert done.returncode == 0, done.stderr[-2000:]
        assert "interpret True True" in done.stdout
    else:
        assert done.returncode != 0
        assert "compiled Triton kernels take CUDA tensors" in done.stderr


def test_record_schema_ships_inside_the_package():
    from importlib import resources

    schema = json.loads((resources.files("kernels.io") / "metrics.schema.json").read_text())
    assert schema["type"] == "object" and "status" in schema["properties"]
    assert not (ROOT / "workflow" / "schemas" / "metrics.schema.json").exists()


def test_compat_names_the_feature_and_version_it_was_not_written_for(monkeypatch):
    import triton

    from kernels import _compat

    _compat.require("triton", "counting interpreter traffic")  # the installed release is known
    monkeypatch.setattr(triton, "__version__", "9.1.0")
    with pytest.raises(_compat.CompatError) as err:
        _compat.require("triton", "counting interpreter traffic")
    message = str(err.value)
    assert "counting interpreter traffic" in message and "triton 9.1.0" in message
    assert "3.6 and 3.7" in message


def test_no_module_imports_one_that_imports_it_back():
    """No circles among the modules of kernels/ and reports/, function-level imports included:
    each group found is named with who imports whom in it."""
    from import_graph import circles, graph

    edges = graph(ROOT, ("kernels", "reports"))
    found = circles(edges)
    said = [
        "; ".join(f"{m} imports {', '.join(sorted(edges[m] & set(group)))}" for m in group) for group in found
    ]
    assert not found, "\n".join(said)


def test_the_import_scan_finds_a_circle_through_a_function_level_import(tmp_path):
    from import_graph import circles, graph

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from pkg.b import f\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    from . import a\n")
    (tmp_path / "pkg" / "c.py").write_text("import pkg.a\n")
    assert circles(graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.b"]]


def test_the_layout_names_every_module_and_no_other():
    """docs/layout.md's tree names every module of kernels/ and reports/ (an empty package
    marker aside), and no module that is not there: one added, moved or removed without it
    fails here."""
    from layout_map import modules, named_paths

    named = named_paths((ROOT / "docs" / "layout.md").read_text(encoding="utf-8"))
    present = modules(ROOT, ("kernels", "reports"))
    listed = {p for p in named if p.endswith(".py") and p.startswith(("kernels/", "reports/"))}
    assert not present - named, f"not in docs/layout.md: {sorted(present - named)}"
    assert not listed - present, f"in docs/layout.md but not in the tree: {sorted(listed - present)}"


def test_no_built_in_path_name_is_written_outside_its_own_folder():
    """Generic code (kernels/, reports/) asks a path's registration what it is: a built-in
    name as a string appears only in the path's own folder and in kernels/spec.py."""
    from path_names import own_place, written_names

    ours = {name: entry for name, entry in catalog.registered().items() if entry.ours}
    found = written_names(ROOT, ("kernels", "reports"), set(ours))
    outside = [f"{m}:{line} {name!r}" for m, line, name in found if not own_place(m, name, ours[name].origin)]
    assert found, "the scan found no name at all: the registrations write theirs"
    assert not outside, "\n".join(outside)


def test_the_name_scan_finds_a_planted_name_and_passes_a_docstring(tmp_path):
    from path_names import own_place, written_names

    (tmp_path / "pkg").mkdir()
    source = '"""mentions flash"""\nX = {"flash": 1}\n\ndef f():\n    "flash"\n'
    (tmp_path / "pkg" / "a.py").write_text(source)
    assert written_names(tmp_path, ("pkg",), {"flash"}) == [("pkg/a.py", 2, "flash")]
    assert own_place("kernels/paths/flash/model.py", "flash", "kernels.paths.flash")
    assert not own_place("kernels/models/cost.py", "flash", "kernels.paths.flash")
