"""Data-Juicer's selectors as global ops: read a field, rank or count it over the whole dataset,
keep the selected rows and turn the others into tombstones with the selector's rule as reason.

``values``: a (dotted) field's values as numbers (Data-Juicer's ``stats_to_number``), as group
keys, or as tags; ``order``: the order rows are ranked in (ties: input order, read from the ids)
and the cut after the first k rows of it; ``passes``: the three passes every selector makes
(a slim projection per block, one decision over all of them, a marking pass) on Ray or on one table.
"""
