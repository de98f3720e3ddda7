"""Data-Juicer's model files (sentencepiece, KenLM, Hugging Face tokenizers): finding them offline and loading them."""
