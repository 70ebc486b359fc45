"""The metrics record's schema (``metrics.schema.json``, shipped inside this package): every
record is checked against it before it is written, and written atomically."""

from __future__ import annotations

import json
import os
from functools import cache
from importlib import resources
from pathlib import Path

from kernels.io.atomic import write_text_atomic

SCHEMA = resources.files("kernels.io") / "metrics.schema.json"


@cache
def _validator():
    import jsonschema

    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate_record(record: dict) -> None:
    """Raise ValueError naming the first field that breaks the schema."""
    errors = sorted(_validator().iter_errors(record), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        field = ".".join(str(p) for p in first.path) or "(record)"
        raise ValueError(f"metrics record field {field}: {first.message}")


class DamagedRecordError(ValueError):
    """A record file that cannot be used as it is; the message names the file and why."""


def _refuse_constant(name: str) -> float:
    raise ValueError(f"holds {name}, which JSON does not allow")


def load_json(path: str | os.PathLike, *, strict: bool = True):
    """The JSON in a file, or DamagedRecordError naming the file and what is wrong: absent,
    empty, cut short, not JSON; when strict, also NaN or Infinity inside or not an object."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DamagedRecordError(f"{path}: cannot be read ({err})") from None
    if not text.strip():
        raise DamagedRecordError(f"{path}: is empty")
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


def read_record(path: str | os.PathLike) -> dict:
    """A metrics record checked against the schema; DamagedRecordError names the file and why."""
    record = load_json(path)
    try:
        validate_record(record)
    except ValueError as err:
        raise DamagedRecordError(f"{path}: {err}") from None
    return record


def write_record(record: dict, path: str | os.PathLike) -> None:
    validate_record(record)
    write_text_atomic(path, json.dumps(record, indent=1, allow_nan=False) + "\n")
