"""The Triton implementations: three materialized kernels, the fused kernel with and without
carried row statistics, and the launches they make (``launch``)."""
