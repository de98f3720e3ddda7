"""raypress.operators.moe.cap."""
