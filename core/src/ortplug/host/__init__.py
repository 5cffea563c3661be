"""The host: its facts (capabilities, hardware, probes, what fits it), the environment
ortplug configures, the one ONNX Runtime import, and plugin-EP libraries with their trial.
"""
