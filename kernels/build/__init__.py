"""Ahead-of-time builds: every Triton variant a sweep launches compiled for GPU targets that
need not be present, with its resources, occupancy and SASS instruction mix."""
