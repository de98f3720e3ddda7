"""raypress.operators.shared."""
