"""Report rendering from run records (reports read only records, never a live run)."""
