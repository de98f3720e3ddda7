"""Statistics of reported results (bootstrap intervals)."""
