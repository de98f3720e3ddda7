"""SimHash near-dedup: 64-bit SimHashes and the permuted-block buckets that find pairs within a Hamming distance."""
