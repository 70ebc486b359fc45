"""Every table a rule writes carries a seal (kernels.io.seal): one cut at a row's end still
reads as a table, but is damaged, so the workflow sets it aside and makes it again."""

import json

import pandas as pd
import pytest

from kernels.io.atomic import write_atomic
from kernels.io.computed_tables import write_table
from kernels.io.records import DamagedRecordError, read_leaf
from kernels.io.seal import seal_path

ROWS = [{"tokens": t, "dtype": "float32", "element_bytes": 4, "bytes": 4 * t * t} for t in (16, 64, 256)]


def test_a_sealed_table_cut_at_a_row_end_is_damaged_naming_both_counts(tmp_path):
    path = tmp_path / "matrix_sizes.csv"
    write_table(path, "matrix_sizes.csv", ROWS)
    assert json.loads(seal_path(path).read_text())["rows"] == 3
    assert len(read_leaf(path, "table")) == 3
    path.write_text("".join(path.read_text().splitlines(True)[:2]))  # the header and one row
    with pytest.raises(DamagedRecordError, match=r"holds 1 row, \d+ bytes, but its writer wrote 3 rows"):
        read_leaf(path, "table")


def test_a_table_without_its_seal_is_not_trusted(tmp_path):
    path = tmp_path / "matrix_sizes.csv"
    write_table(path, "matrix_sizes.csv", ROWS)
    seal_path(path).unlink()  # its writer stopped between the table and its seal
    with pytest.raises(DamagedRecordError, match="has no seal"):
        read_leaf(path, "table")


def test_a_collected_parquet_table_is_held_to_its_seal(tmp_path):
    path = tmp_path / "metrics.parquet"
    frame = pd.DataFrame(ROWS)
    write_atomic(path, lambda p: frame.to_parquet(p, index=False), sealed=True)
    read_leaf(path, "sealed")
    write_atomic(path, lambda p: frame.head(1).to_parquet(p, index=False))  # rewritten, unsealed
    with pytest.raises(DamagedRecordError, match="holds 1 row, .* but its writer wrote 3 rows"):
        read_leaf(path, "sealed")


def test_a_table_changed_in_place_says_its_content_differs_not_its_counts(tmp_path):
    """One value edited to another of the same width: the rows and bytes agree with the seal,
    so the message says what differs (the content's SHA-256), not two equal counts."""
    path = tmp_path / "matrix_sizes.csv"
    write_table(path, "matrix_sizes.csv", ROWS)
    sealed = json.loads(seal_path(path).read_text())
    path.write_text(path.read_text().replace("float32", "float64"))
    with pytest.raises(DamagedRecordError) as raised:
        read_leaf(path, "table")
    said = str(raised.value)
    assert f"holds the 3 rows, {sealed['bytes']:,} bytes its writer wrote, but not their content" in said
    assert sealed["sha256"][:12] in said and "but its writer wrote" not in said
