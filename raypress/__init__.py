"""raypress: every step of making a foundation model as an operator of one Ray pipeline."""

__version__ = "0.1.0"
