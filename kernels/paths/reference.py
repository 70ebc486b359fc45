"""The float64 definition, cast back to the input dtype: what every other one is checked against."""

from kernels.catalog import implementation


@implementation("reference", stores="SP", sp_dtype="float64")
def reference(q, k, v, *, causal):
    """scores, scale, mask, softmax and P·V in float64, S and P stored."""
    from kernels.impl.reference import reference as run

    return run(q, k, v, causal)
