"""Machine layer: instruction-level simulation from what a kernel holds (registers,
a shared-memory image, descriptors) to what the hardware writes.  Composes layouts and numerics.
"""
