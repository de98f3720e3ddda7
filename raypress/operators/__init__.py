"""Operators by domain; each module registers its ops with raypress.operators.registry."""
