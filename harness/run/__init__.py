"""One benchmark run, start to end: its spec and parallelism, inputs, the framework's process, profiling and
derived metrics."""
