"""The metrics record's schema (``metrics.schema.json``, shipped inside this package): every
record is checked against it before it is written, and written atomically."""

from __future__ import annotations

import json
import os
from functools import cache
from importlib import resources

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


def write_record(record: dict, path: str | os.PathLike) -> None:
    validate_record(record)
    write_text_atomic(path, json.dumps(record, indent=1, allow_nan=False) + "\n")
