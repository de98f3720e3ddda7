"""General-purpose operators that are not tied to one data domain."""
