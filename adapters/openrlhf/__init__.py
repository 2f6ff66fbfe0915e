"""OpenRLHF: the adapter (OpenRLHF's own train_ppo_ray) and its reward hook."""
