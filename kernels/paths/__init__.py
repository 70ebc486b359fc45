"""attnio's own attention paths, one folder each (a PyTorch one may be a single module):
its registration (``kernels.catalog.implementation``, the package's ``__init__``), its
forward kernels, its backward and every model of it, registered exactly as a plugin's would
be. A registration imports its kernels on first call, so that planning a study imports
neither torch nor triton; its models (``model.py``, ``backward_model.py``) never import them.
Adding one of ours is adding its folder here.
"""
