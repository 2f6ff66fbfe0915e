"""verl: the adapter (verl's own main_ppo with Hydra overrides) and its reward hook."""
