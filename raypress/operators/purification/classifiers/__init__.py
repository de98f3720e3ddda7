"""The input side of the classifier stages: labelled image rows -> arrays."""
