"""BeanCounter's demographic toxicity analysis: HolisticBias descriptors, matching them in text, toxicity (scorers, statistics), report files."""
