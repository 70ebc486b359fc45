"""Running and counting: one sweep point into a record, every skip decision, the
interpreter's byte counter, timing, peak memory, Nsight Compute, validation against float64,
the tile-softmax error map and provenance."""
