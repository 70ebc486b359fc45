"""The one writer of the CSV tables a rule computes on its own (the model's, the predictions',
the tile errors: kernels/io/tables.schema.json). A table's columns are those its schema
declares, in its order, whatever its rows hold: a sweep with nothing for a table (no square
point, no staged point, no backward) gets the table's header and no row, which every reader
reads as an empty table with its columns. Twice before, a class of sweeps the config schema
accepts made a writer take its header from a first row that was not there."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable

from kernels.io.atomic import write_text_atomic
from kernels.io.records import TABLE_SCHEMAS, table_schemas


def columns(table: str) -> tuple[str, ...]:
    """The columns of ``table`` (its file name in tables.schema.json), in the schema's order."""
    schema = table_schemas()["tables"].get(table)
    if schema is None:
        raise KeyError(f"{table}: no table schema in {TABLE_SCHEMAS.name}")
    return tuple(field["name"] for field in schema["fields"])


def write_table(path: str | os.PathLike, table: str, rows: Iterable[dict]) -> int:
    """``rows`` as the sealed CSV table ``table`` of tables.schema.json at ``path``, atomically,
    with its schema's header (and only that, where there is no row); a value a row leaves out
    or holds as None is an empty cell. A row with a column the schema does not declare is
    refused naming it: the schema says what every table holds. The number of rows is returned."""
    header = columns(table)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    count = 0
    for row in rows:
        unknown = [key for key in row if key not in header]
        if unknown:
            raise ValueError(
                f"{table}: a row holds {', '.join(unknown)}, which {TABLE_SCHEMAS.name} does not "
                f"declare for it (its columns: {', '.join(header)})"
            )
        writer.writerow(row)
        count += 1
    write_text_atomic(path, text.getvalue(), sealed=True)
    return count
