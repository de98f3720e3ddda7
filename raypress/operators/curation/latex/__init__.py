"""LaTeX source -> an interleaved document (MINT-1T's arXiv path): cleaning, TexSoup and regex walks, figures."""
