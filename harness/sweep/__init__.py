"""Sweeps: a grid of runs, its index on disk, the executors that run its cells, and the spread over repeats."""
