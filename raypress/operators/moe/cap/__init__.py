"""MoE-CAP accounting and measurement, as used by the ``moe_cap_benchmark`` op.

The arithmetic: ``accounting`` (bytes, FLOPs and cost of one MoE forward pass), ``hardware`` (the
peaks and prices it divides by), ``metrics`` (step records and request timings -> S-MBU/S-MFU,
latencies, exact match), ``radar`` (the CAP figure).  The measuring: ``target`` (what a measured
model offers), ``http_client`` and ``in_process`` (its two kinds), ``levels`` (one concurrency
level), ``report`` (a level's numbers and the Report).  No module here registers an op.
"""
