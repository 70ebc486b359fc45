"""The index's findings hold for any prediction table: a finding whose data is missing (a fused
kernel that cannot launch where the materialized one can) is left out or says why, and never
raises."""

import pandas as pd
import pytest
from modelled_study import planned_sweep

from kernels.models.prediction_tables import prediction_rows
from kernels.planning.gpus import GPUS
from kernels.planning.sweep import resolved
from reports.pages import index


@pytest.fixture(scope="module")
def predictions() -> pd.DataFrame:
    """The model's predictions for the default study's sweep (as a 32 MiB machine plans it),
    as rule predict writes them."""
    rows, _ = prediction_rows(resolved(planned_sweep(), 32 * 2**20), [], GPUS.values())
    table = pd.DataFrame(rows)
    table["launch_reason"] = table["launch_reason"].astype(object)
    return table


def largest_h200(table: pd.DataFrame) -> int:
    return int(table[(table["gpu"] == "H200") & table["in_sweep"]]["tokens"].max())


def test_the_finding_compares_both_paths_at_the_largest_swept_length(predictions):
    said = index.finding_prediction(predictions)
    assert (
        said.startswith("Predicted, not measured: on an H200")
        and f"T = {largest_h200(predictions):,}" in said
    )


def test_a_fused_kernel_that_cannot_launch_at_the_largest_length_is_passed_over(predictions):
    """The largest length's fused rows cannot launch (a block too large for sm_90): the finding
    compares the largest length at which both paths launch."""
    largest = largest_h200(predictions)
    broken = predictions.copy()
    cannot = (broken["path"] == "fused") & (broken["tokens"] == largest)
    broken.loc[cannot, "launch_reason"] = "does not build for sm_90"
    said = index.finding_prediction(broken)
    shorter = broken[(broken["gpu"] == "H200") & broken["in_sweep"] & (broken["tokens"] < largest)]
    assert said is not None and f"T = {int(shorter['tokens'].max()):,}" in said


def test_no_length_with_both_paths_says_why(predictions):
    broken = predictions.copy()
    broken.loc[broken["path"] == "fused", "launch_reason"] = "does not build for sm_90"
    said = index.finding_prediction(broken)
    assert said is not None and "no swept shape has both paths" in said and "does not build for sm_90" in said
