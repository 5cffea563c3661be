"""Smoke check of the coreml provider on a real host (an Apple Silicon Mac).

Builds the static demo model (or --model M.onnx) through the default policy
and with the explicit chain ["coreml", "cpu"], checks that ONNX Runtime realized
the provider and that it took the graph's nodes, and prints its latency
against the CPU provider. Exits 0 when it did; 2 with "not available: <reason>"
on a host without the hardware or runtime; 1 when the check failed.

    python plugins/coreml/scripts/smoke.py [--model M.onnx] [--repeat 50]
"""

import sys

from ortplug.testing.smoke import main

if __name__ == "__main__":
    sys.exit(main("coreml", sys.argv[1:]))
