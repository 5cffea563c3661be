"""Smoke check of the webgpu provider on a real host (a GPU with a Vulkan, D3D12 or Metal driver).

Builds the static demo model (or --model M.onnx) through the default policy
and with the explicit chain ["webgpu", "cpu"], checks that ONNX Runtime
realized the provider and that it took the graph's nodes, and prints its
latency against the CPU provider. Exits 0 when it did; 2 with "not available:
<reason>" on a host without an adapter Dawn runs on (a software adapter counts
only with ORTPLUG_WEBGPU_ALLOW_SOFTWARE=1); 1 when the check failed.

    python plugins/webgpu/scripts/smoke.py [--model M.onnx] [--repeat 50]
"""

import sys

from ortplug.testing.smoke import main

if __name__ == "__main__":
    sys.exit(main("webgpu", sys.argv[1:]))
