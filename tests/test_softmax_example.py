"""The seed's Figure 4 numbers, computed by the package."""

import math

from kernels.models.softmax_example import figure4, softmax, tile_local_softmax


def test_figure4_probabilities():
    values = figure4(2.0)
    assert math.isclose(values["row_0000_first"], 0.25, rel_tol=1e-12)
    assert math.isclose(values["row_00xx_first"], 1 / (2 + 2 * math.exp(2)), rel_tol=1e-12)
    assert round(100 * values["row_00xx_first"], 2) == 5.96
    assert math.isclose(values["first_two_only_first"], 0.5, rel_tol=1e-12)


def test_tile_local_softmax_concatenates_wrong_denominators():
    row = [0.0, 0.0, 2.0, 2.0]
    local = tile_local_softmax(row, 2)
    assert math.isclose(sum(local), 2.0)  # each tile sums to one on its own
    assert local[0] == figure4()["first_two_only_first"]
    assert local[0] != softmax(row)[0]
    assert tile_local_softmax(row, 4) == softmax(row)
