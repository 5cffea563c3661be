"""A provider plugin declared by its ``ortplug.json`` alone, used by ortplug's tests.

The kind ``manifestazure`` (ONNX Runtime's ``AzureExecutionProvider``, in every CPU wheel), its
config class and its probe are named in ``ortplug.json`` by import path; ``plugin.py`` only
offers the kind. It is not installed into the test venv: its ONNX Runtime name is the one
ortplug-azuretest (the undeclared hook form) claims, so the tests put it on ``sys.path``.
"""
