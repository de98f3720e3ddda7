"""What every LLM-backed op shares: client, endpoint, parameters, op bases, Data-Juicer's text helpers."""
