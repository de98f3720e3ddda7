"""Ray Train loops shared by stages (the MoE LM, classifiers, the bridge) and the storage/progress life cycle
of a fit.  Below the operators: imports models, kernels and artifacts, never operators or serving."""
