"""Generic text mappers and filters with Data-Juicer's names, parameters, stats and semantics.

words.py / wordlists.py / batch.py hold the shared vocabulary (word splitting, special
characters, word lists, the vectorised batch form); each other module registers a few ops."""
