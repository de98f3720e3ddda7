"""HTML page -> an interleaved document (MINT-1T's HTML path, OBELICS-style extraction with selectolax)."""
