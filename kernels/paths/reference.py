"""The float64 definition, cast back to the input dtype: what every other one is checked against."""

from kernels.catalog import EVERY_MASK, implementation
from kernels.spec import REFERENCE


@implementation(
    REFERENCE,
    stores="SP",
    sp_dtype="float64",
    working_model="kernels.paths.reference:working_bytes",
    masks=EVERY_MASK,
)
def reference(q, k, v, *, causal, mask=None):
    """scores, scale, mask, softmax and P·V in float64, S and P stored."""
    from kernels.impl.reference import reference as run

    return run(q, k, v, causal, mask)


def working_bytes(point) -> int:
    """Beyond S and P: float64 copies of q, k, v and O (pure Python: the plan asks it)."""
    return 4 * point.groups * point.tokens * point.head_dim * 8
