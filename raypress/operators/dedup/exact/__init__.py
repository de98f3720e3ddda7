"""Exact dedup by a key column: each group keeps its smallest id."""
