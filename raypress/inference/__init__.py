"""Ray-free inference that stages and Serve apps share: the MoE LM ``engine`` (continuous batching;
its ``requests``, ``stats``, ``text_stream`` and ``sampling``) and the BridgePure ``purifier``."""
