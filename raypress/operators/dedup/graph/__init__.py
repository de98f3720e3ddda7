"""Graph algorithms over shuffled edge tables (connected components by large/small star)."""
