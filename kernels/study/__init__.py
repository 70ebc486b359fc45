"""What to run and what it should cost: sweep points (one name, one path, one command-line
form), sweep planning, the cost model and the device choice. Imports neither torch nor triton,
so Snakemake plans with it."""
