"""Availability attacks (protections) that BridgePure learns to undo."""
