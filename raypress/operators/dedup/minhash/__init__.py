"""MinHash-LSH near-dedup: shingles, signature bands, the LSH shuffle steps and the driver both MinHash ops share."""
