"""The study's leaves and their schemas (shipped inside this package): the metrics record
(``metrics.schema.json``: every record is checked against it before it is written, and written
atomically), the validation and build results, the ceilings, the provenance, the model's
example (``<kind>.schema.json``) and the model's CSV tables (``tables.schema.json``). A leaf
that cannot be used as it is — unreadable, empty, cut short, not JSON, of the wrong shape, or
saying something else than its file name — raises DamagedRecordError naming the file and why.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from kernels import masks
from kernels.io.atomic import write_text_atomic
from kernels.io.seal import broken_seal
from kernels.spec import DEFAULT_PASS

SCHEMA = resources.files("kernels.io") / "metrics.schema.json"

# kind → (its schema, what it is called in a message, whether NaN may stand in it: a
# validation case that did not run has a NaN error; the provenance and build results are
# written by json.dumps, which writes NaN where a value is one)
JSON_LEAVES: dict[str, tuple[str, str, bool]] = {
    "record": ("metrics.schema.json", "metrics record", False),
    "validation": ("validation.schema.json", "validation result", True),
    "build": ("build.schema.json", "build result", True),
    "ceilings": ("ceilings.schema.json", "ceilings", False),
    "env": ("env.schema.json", "provenance", True),
    "softmax_example": ("softmax_example.schema.json", "softmax example", False),
}
TABLE_SCHEMAS = resources.files("kernels.io") / "tables.schema.json"
# every kind read_leaf checks: the JSON ones, a CSV table of tables.schema.json (and its
# seal), a table of another shape held to its seal only (kernels.io.seal), a page
LEAF_KINDS = (*JSON_LEAVES, "table", "sealed", "page")


@cache
def _validator(schema_name: str = "metrics.schema.json"):
    import jsonschema

    schema = json.loads((resources.files("kernels.io") / schema_name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _first_error(value: Any, schema_name: str) -> tuple[str, str] | None:
    """(field, message) of the first place ``value`` breaks the schema, or None."""
    errors = sorted(_validator(schema_name).iter_errors(value), key=lambda e: [str(p) for p in e.path])
    if not errors:
        return None
    first = errors[0]
    return ".".join(str(p) for p in first.path), first.message


def validate_record(record: dict) -> None:
    """Raise ValueError naming the first field that breaks the schema."""
    found = _first_error(record, "metrics.schema.json")
    if found:
        field, message = found
        raise ValueError(f"metrics record field {field or '(record)'}: {message}")


class DamagedRecordError(ValueError):
    """A record file that cannot be used as it is; the message names the file and why."""


def _refuse_constant(name: str) -> float:
    raise ValueError(f"holds {name}, which JSON does not allow")


def _read_text(path: str | os.PathLike) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DamagedRecordError(f"{path}: cannot be read ({err})") from None
    if not text.strip():
        raise DamagedRecordError(f"{path}: is empty")
    return text


def load_json(path: str | os.PathLike, *, strict: bool = True):
    """The JSON in a file, or DamagedRecordError naming the file and what is wrong: absent,
    empty, cut short, not JSON; when strict, also NaN or Infinity inside or not an object."""
    text = _read_text(path)
    try:
        value = json.loads(text, parse_constant=_refuse_constant if strict else None)
    except json.JSONDecodeError as err:
        body = text.strip()
        opened_unclosed = body[0] in "{[" and body[-1] != {"{": "}", "[": "]"}[body[0]]
        cut = " (cut short?)" if opened_unclosed else ""
        raise DamagedRecordError(f"{path}: is not valid JSON{cut}: {err}") from None
    except ValueError as err:
        raise DamagedRecordError(f"{path}: {err}") from None
    if strict and not isinstance(value, dict):
        kind = type(value).__name__
        raise DamagedRecordError(f"{path}: holds a JSON {kind}, not an object")
    return value


# What a leaf's file name says it holds: fields that must have these values (in a record, or
# in every row of a validation result), or a function of the value that returns what
# disagrees (None when nothing does).
Expect = Mapping[str, Any] | Callable[[Any], str | None] | None
# What a field a record may leave out says when it is absent (metrics.schema.json), a value or a
# function of the record: a record without a pass is a forward one; one without query_tokens or
# kv_heads (written before them) has as many queries as keys and a K/V head per query head.
ABSENT_MEANS: dict[str, Any] = {
    "pass": DEFAULT_PASS,
    "query_tokens": lambda row: row.get("tokens"),
    "kv_heads": lambda row: row.get("heads"),
    "mask": lambda row: masks.from_causal(bool(row.get("causal"))).spelled(),  # before masks
}


def said(row: Mapping, field: str) -> Any:
    """A record's field, or what its absence means (ABSENT_MEANS)."""
    if field in row:
        return row[field]
    absent = ABSENT_MEANS.get(field)
    return absent(row) if callable(absent) else absent


def _disagreement(value: Any, expect: Expect) -> str | None:
    if expect is None:
        return None
    if callable(expect):
        return expect(value)
    rows = value if isinstance(value, list) else [value]
    for number, row in enumerate(rows):
        for field, wanted in expect.items():
            found = said(row, field)
            if found != wanted:
                where = f"row {number} says" if isinstance(value, list) else "says"
                return f"{where} {field}={found!r}, but its file name says {field}={wanted!r}"
    return None


def read_record(path: str | os.PathLike, expect: Expect = None) -> dict:
    """A metrics record checked against the schema (and against what its file name says,
    when ``expect`` gives that); DamagedRecordError names the file and why."""
    return read_leaf(path, "record", expect)


def read_leaf(path: str | os.PathLike, kind: str, expect: Expect = None):
    """A leaf of the study checked against the schema of its kind (LEAF_KINDS) and, when
    ``expect`` is given, against what its file name says; its value (a table's rows as
    dicts, a page's text). DamagedRecordError names the file and why."""
    if kind in ("table", "sealed"):
        rows = read_table(path) if kind == "table" else None
        broken = broken_seal(path)  # after its shape, whose errors say more
        if broken:
            raise DamagedRecordError(f"{path}: {broken}")
        return rows
    if kind == "page":
        return read_page(path)
    schema_name, what, nan_allowed = JSON_LEAVES[kind]
    value = load_json(path, strict=False) if nan_allowed else load_json(path)
    found = _first_error(value, schema_name)
    if found:
        field, message = found
        raise DamagedRecordError(
            f"{path}: {what} field {field}: {message}" if field else f"{path}: not a {what}: {message}"
        )
    said = _disagreement(value, expect)
    if said:
        raise DamagedRecordError(f"{path}: {said}")
    return value


@cache
def table_schemas() -> dict:
    """tables.schema.json: the Table Schema of each CSV table a rule computes, by file name."""
    return json.loads(TABLE_SCHEMAS.read_text(encoding="utf-8"))


def _reads_as(text: str, kind: str) -> bool:
    schemas = table_schemas()
    if kind == "integer":
        try:
            int(text)
        except ValueError:
            return False
        return True
    if kind == "number":
        try:
            float(text)
        except ValueError:
            return False
        return True
    if kind == "boolean":
        return text in schemas["trueValues"] or text in schemas["falseValues"]
    return True


def read_table(path: str | os.PathLike) -> list[dict[str, str]]:
    """A CSV table of tables.schema.json (by its file name), its rows as dicts of strings:
    every field a column, every value there of its type, every required value there, every
    row as long as the header. A table with no rows has its header all the same
    (kernels.io.computed_tables); a file with no line at all is empty."""
    path = Path(path)
    schema = table_schemas()["tables"].get(path.name)
    if schema is None:
        raise KeyError(f"{path.name}: no table schema in {TABLE_SCHEMAS.name}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DamagedRecordError(f"{path}: cannot be read ({err})") from None
    if not text:
        raise DamagedRecordError(f"{path}: is empty")
    try:
        lines = list(csv.reader(text.splitlines()))
    except csv.Error as err:
        raise DamagedRecordError(f"{path}: is not a CSV table: {err}") from None
    header, rows = (lines[0] if lines else []), lines[1:]
    missing = [f["name"] for f in schema["fields"] if f["name"] not in header]
    if missing and not header:
        raise DamagedRecordError(f"{path}: has no header (a table of no rows has its columns all the same)")
    if missing:
        raise DamagedRecordError(
            f"{path}: has no column {', '.join(missing)} (its header: {','.join(header)})"
        )
    out = []
    for number, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise DamagedRecordError(
                f"{path}, line {number}: {len(row)} values, but the header names {len(header)} (cut short?)"
            )
        cells = dict(zip(header, row, strict=True))
        for field in schema["fields"]:
            value = cells[field["name"]]
            if value == "":
                if field.get("constraints", {}).get("required"):
                    raise DamagedRecordError(f"{path}, line {number}: no {field['name']}")
            elif not _reads_as(value, field["type"]):
                raise DamagedRecordError(
                    f"{path}, line {number}: {field['name']}={value!r} is not a {field['type']}"
                )
        out.append(cells)
    return out


def read_page(path: str | os.PathLike) -> str:
    """A rendered page (HTML that ends its document) or an executed notebook (a JSON object
    with its cells); DamagedRecordError names the file and why."""
    path = Path(path)
    text = _read_text(path)
    if path.suffix == ".ipynb":
        notebook = load_json(path, strict=False)
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
            raise DamagedRecordError(f"{path}: is not a notebook (no list of cells)")
    elif not text.rstrip().lower().endswith("</html>"):
        raise DamagedRecordError(f"{path}: does not end its HTML document (cut short?)")
    return text


def write_record(record: dict, path: str | os.PathLike) -> None:
    validate_record(record)
    write_text_atomic(path, json.dumps(record, indent=1, allow_nan=False) + "\n")
