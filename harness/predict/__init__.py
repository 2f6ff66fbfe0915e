"""Bridges from runs to the work-depth model: predictions of a run, calibration of the floor, machine probes."""
