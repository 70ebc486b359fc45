"""One module per report page (``storage``, ``traffic``, ``tile_softmax``, ``performance``,
``build``, and ``index`` for the landing page), and ``common``: loading the tables, the look of
every figure and the run summary. Needs pandas, matplotlib and seaborn; never torch."""
