"""wgref command line: the top layer, over refmodel (CPU model) and gpu (hardware)."""
