"""Recorders that run the H200, compare with refmodel on the spot and write fixtures, one module per fixture kind: ``python -m gpu.record.<kind>``."""
