"""Mulberry's Collective MCTS as operators: task families, policies, judges, the search, reflection, SFT data."""
