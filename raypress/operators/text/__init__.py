"""Generic text mappers and filters with Data-Juicer's names, parameters, stats and semantics.

Each op lives in the module named after it (``words_num_filter.py``...).  The rest is shared, in
sub-packages named after what they hold: ``words/`` the vocabulary (word splitting, special
characters, word lists, word edits, the vectorised batch form); ``templates/`` the parameter groups
several ops take and the base classes of the filters and cleaners (range filter, word-list ratio,
regex cleaner); ``models/`` finding and loading Data-Juicer's model files."""
