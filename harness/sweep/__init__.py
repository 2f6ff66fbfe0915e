"""Several runs toward one answer: a sweep's grid, its driver and the executors that run its cells; calibration's
runs of a tiny model at several response lengths."""
