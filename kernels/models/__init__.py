"""What a point should cost, one kind of model per module, each opening with the question it
answers: bytes and FLOPs (cost, backward_cost), the stage chains (stage_cost,
backward_stage_cost, stages), rooflines (predict, hierarchy, expected), the predictions'
tables, and how long a study takes (budget). Pure Python: a path's own models
(kernels/paths/*/model.py) build on these, and Snakemake plans with them."""
