"""TRL: the adapter and the process it launches (TRL's own GRPOTrainer)."""
