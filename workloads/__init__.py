"""Workloads: declarative YAML files, the datasets they read and the shared rewards."""
