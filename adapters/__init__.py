"""Framework adapters, registered lazily by name (see `rlbench.adapters.registry`)."""
