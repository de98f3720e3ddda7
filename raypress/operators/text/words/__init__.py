"""Data-Juicer's word vocabulary: splitting, special characters, word lists, word edits, and the vectorised batch form."""
