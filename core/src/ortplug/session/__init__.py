"""The session layer: plan a session, build it, serialise its runs, check feeds, bind IO, describe it.

Everything above (verification, the build pipeline, the backend) builds and runs ONNX Runtime
sessions through these modules; nothing here knows about candidates or serving.
"""
