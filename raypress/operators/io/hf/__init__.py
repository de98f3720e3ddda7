"""Hugging Face datasets, imported with the Hub switched off (for read_hf_dataset and write_hf_dataset)."""
