"""MoE language model stages: training (`train_moe_lm`), serving and the MoE-CAP benchmark."""
