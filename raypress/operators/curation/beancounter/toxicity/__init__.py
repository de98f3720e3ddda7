"""Toxicity for BeanCounter: scorers (offline profanity-check, Perspective API) and the comparison's statistics."""
