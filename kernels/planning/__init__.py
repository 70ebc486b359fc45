"""What to run: sweep points (one name, one path, one command-line form), the sweep, the
validation cases, the device and its caches, the GPU targets' published figures, launch
candidates and the GPU tests' points. Imports neither torch nor triton: it is what the
Snakefile imports to plan."""
