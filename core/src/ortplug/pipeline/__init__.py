"""The build pipeline: candidates -> prepare/build -> verify -> measure -> serve, and the proving
stages behind a serving CPU reference (the start-up switch, the checks on real traffic)."""
