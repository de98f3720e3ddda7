"""BridgePure on raypress: availability-attack protections, bridge training, purification, and the classifiers and reports that judge it."""
