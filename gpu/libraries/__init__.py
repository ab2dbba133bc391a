"""Runners of real library calls on the GPU, one module per library: the call, the kernel name the profiler shows, the inputs and outputs as raw bits."""
