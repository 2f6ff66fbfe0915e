"""One benchmark run, start to end: the framework's process, stop signals, profiling, step stamps, derived
metrics and failure causes (what a run is, its spec and inputs, is `rlbench.harness.spec`)."""
