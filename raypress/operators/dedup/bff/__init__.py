"""BFF (big friendly filter) paragraph dedup: n-gram hashing, the Bloom filter, ordered decisions and its shards."""
