"""Verifier: bit-level differ, replay cases, shrinker, fixtures and their replay.
Sits on the model; never imports gpu.
"""
