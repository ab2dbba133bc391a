"""Layouts layer: register fragments, matrix descriptors, swizzles, shared-memory
layouts, ldmatrix/stmatrix addressing, TMA box images.  Independent of numerics.
"""
