"""Policies: local LMs in Ray actors or OpenAI-compatible endpoints, and the policy-set Model a training run writes."""
