"""The shapes most text ops are instances of: a one-stat range filter, a word-list ratio filter, a regex cleaner, and the parameter groups they share."""
