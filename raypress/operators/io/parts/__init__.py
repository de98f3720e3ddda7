"""Output parts: writing each part atomically, and joining parts into the one file a writer's path names."""
