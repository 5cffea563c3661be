"""Verification beside the backend: output comparison with its verdict records, the sample
inputs it runs, precision variants, and the smoke check of a provider on real hardware.
"""
