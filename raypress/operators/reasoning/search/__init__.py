"""Collective MCTS: the tree, the search and its baselines, judges, reflection paths, and the vocabulary (types) they share."""
