"""A page states a measured rate only where it is one (reports.pages.rates): a data time that
stands measurably above the fixed cost, and a rate no faster than this machine's ceilings."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from kernels.spec import MIN_DATA_SHARE
from reports.pages.rates import BYTES, ELEMENTS, FLOPS, data_ms, fastest, measurable_ms, rate, within_ceilings

OPS = {
    "products": [{"flops_per_s": 90e9}, {"flops_per_s": None}],
    "passes": [
        {"op": "softmax", "place": "inside", "per_s": 3e9},
        {"op": "softmax", "place": "flushed", "per_s": 9e12},  # one call less a fixed cost: no ceiling
        {"op": "scale", "place": "inside", "per_s": 70e9},
    ],
}
CEILINGS = {"copy_gbps": 9.0, "matmul_tflops": 0.05, "exp_per_s": 2e9, "ops": OPS}
CEILINGS |= {
    "levels": [
        {"level": "L1d", "copy_gbps": 180.0, "update_gbps": 210.0},
        {"level": "DRAM", "copy_gbps": 9.0},
    ]
}


def test_the_fastest_rate_of_each_kind_is_the_ceilings_own_best():
    assert fastest(CEILINGS, BYTES) == pytest.approx(210e9)  # L1d's in-place update
    assert fastest(CEILINGS, FLOPS) == pytest.approx(90e9)  # the sweep's product beats the square one
    assert fastest(CEILINGS, ELEMENTS) == pytest.approx(3e9)  # the warm softmax pass; not the flushed one
    assert fastest({"copy_gbps": None, "levels": None}, BYTES) is None
    assert fastest(None, FLOPS) is None
    with pytest.raises(ValueError, match="kind='seconds': allowed values are bytes, FLOPs, elements"):
        fastest(CEILINGS, "seconds")


def test_a_rate_beyond_the_ceilings_is_said_too_short_to_measure():
    assert rate(150e9, BYTES, CEILINGS).text == "150 GB/s"
    beyond = rate(9.216e15, BYTES, CEILINGS)  # the 9,216,000 GB/s
    assert not beyond.measured and "9,216,000" not in beyond.text
    assert beyond.text == (
        "too short to measure (its bytes over its time would beat the fastest rate this machine's "
        "ceilings measured, 210 GB/s)"
    )
    assert "90 GFLOP/s" in rate(7.3728e16, FLOPS, CEILINGS, "GFLOP/s").text
    assert not rate(math.inf, BYTES, CEILINGS).measured and not rate(-1.0, BYTES, CEILINGS).measured
    assert rate(9.216e15, BYTES, {}).measured  # no ceiling of that kind: nothing to hold it against


def test_a_data_time_is_measured_above_its_spread_and_the_ceilings_share():
    assert data_ms(1.0, 0.5) == pytest.approx(0.5)
    assert data_ms(1.0, 1.0) is None and data_ms(1.0, 1.2) is None  # no time left to the data
    assert data_ms(1.0, 1.0 - MIN_DATA_SHARE / 2) is None  # under the share
    assert data_ms(1.0, 0.8, spread_ms=0.25) is None  # within its own repeats' spread
    assert data_ms(1.0, 0.8, spread_ms=0.15) == pytest.approx(0.2)
    rows = pd.DataFrame({"time_ms": [1.0, 1.0, 1.0], "time_p10_ms": [0.9, 0.7, 0.99]})
    rows["time_p90_ms"] = [1.1, 1.3, 1.01]
    found = measurable_ms(rows, pd.Series([0.5, 0.5, 0.99]))
    assert found.iloc[0] == pytest.approx(0.5) and math.isnan(found.iloc[1]) and math.isnan(found.iloc[2])
    cold = pd.DataFrame({"cold_time_ms": [2.0]})  # no spread in the table: the share alone
    assert measurable_ms(cold, pd.Series([1.0]), cold=True).iloc[0] == pytest.approx(1.0)


def test_a_table_leaves_a_rate_beyond_the_ceilings_blank_and_says_so():
    table = pd.DataFrame({"gbps": [150.0, 9.2e6, None], "tflops": [0.01, 0.02, 7e4]})
    shown, note = within_ceilings(table, {"gbps": (BYTES, 1e9), "tflops": (FLOPS, 1e12)}, CEILINGS)
    assert shown["gbps"].tolist()[0] == 150.0 and shown["gbps"].isna().tolist() == [False, True, True]
    assert shown["tflops"].isna().tolist() == [False, False, True]
    assert note.startswith("**Too short to measure:** 2 rates in the table would beat the fastest")
    assert within_ceilings(table.iloc[:1], {"gbps": (BYTES, 1e9)}, CEILINGS)[1] is None
    assert table["gbps"].iloc[1] == 9.2e6  # the caller's table is left as it was
