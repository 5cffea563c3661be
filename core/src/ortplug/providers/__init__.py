"""What a provider is given: provider configs with their typed option fields, and the
session and run options.
"""
