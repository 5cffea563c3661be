"""The build pipeline: candidates -> prepare/build -> verify -> measure -> serve.

``build_pipeline`` holds the order and the decisions; ``measure`` times candidates; ``report``
is what a build tells (``ProviderReport``, ``Candidate``); ``startup``, ``switch_state``,
``real_traffic`` and ``traffic_check`` run the proving stages behind a serving CPU reference
(the start-up switch and the checks on real traffic).
"""
