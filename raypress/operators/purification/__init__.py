"""BridgePure on raypress: image codecs, availability-attack protections, bridge training, purification."""
