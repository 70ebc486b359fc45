"""The attention implementations behind ``kernels.attention``: the float64 reference, the
PyTorch paths and the Triton kernels, their argument checks and the Triton mode switch.

This layer knows nothing of sweeps, measuring, building or reporting.
"""
