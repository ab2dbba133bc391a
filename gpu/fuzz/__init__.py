"""Fuzz campaigns: the CPU-model engine, the GPU-resident engine, library-call targets, user kernels, shards over devices and hosts (Ray)."""
