"""The RefinedWeb/Gopher quality rules (as DCLM computes them), as pure functions of a string."""
