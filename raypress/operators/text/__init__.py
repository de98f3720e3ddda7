"""Generic text mappers and filters with Data-Juicer's names, parameters, stats and semantics.

Each op lives in the module named after it (``words_num_filter.py``...).  The rest is shared:
words.py / wordlists.py / batch.py hold the vocabulary (word splitting, special characters, word
lists, the vectorised batch form); params.py the parameter groups several ops take;
range_filter.py, wordlist_ratio.py and regex_clean.py the base classes of the filters and cleaners."""
