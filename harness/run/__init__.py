"""One benchmark run, start to end, as phases `runner.py` sequences: resolve, prepare, launch and watch, finish;
and what they share: the framework's process, stop signals, progress, profiling, step stamps, derived metrics
and failure causes (what a run is, its spec and inputs, is `rlbench.harness.spec`)."""
