"""Shuffles on plain Ray tasks: route Arrow tables by key, run one step per partition, collect counts."""
