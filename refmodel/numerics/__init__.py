"""Numerics layer: FP8 formats, cvt, scaling recipes, the wgmma accumulator, GEMM chains.

Independent of the layouts layer (a test enforces it).
"""
