"""CCNet paragraph dedup: normalised line hashes, occurrences, decisions and block edits."""
