"""raypress.inference."""
