"""MoE language-model ops: training (``train_moe_lm``) and the MoE-CAP benchmark (``moe_cap_benchmark``,
its accounting in ``cap/``); serving one is ``raypress.serving.serve_llm``."""
