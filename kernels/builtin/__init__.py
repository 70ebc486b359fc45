"""attnio's own implementations, one module each, registered as a plugin's would be
(``kernels.catalog.implementation``). Each wrapper imports its kernel on first call, so that
planning a study imports neither torch nor triton. Adding one of ours is adding its module here.
"""
