"""Operator attribution (issue 22): FLOPs and bytes per operator call from the shared table
``pyprof/spec/flops.json`` (:mod:`~pyprof.attribution.flops`), folded stacks for flame graphs
(:mod:`~pyprof.attribution.flamegraph`) and the machine's peaks for a roofline
(:mod:`~pyprof.attribution.peaks`); :mod:`~pyprof.attribution.cli` holds the commands."""
