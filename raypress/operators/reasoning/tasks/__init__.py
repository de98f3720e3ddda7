"""Reasoning tasks: the families (families/), the catalog by name, and a task as a Dataset row."""
