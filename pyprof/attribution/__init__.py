"""Operator attribution (issue 22): the capture of imperative calls in a session
(:mod:`~pyprof.attribution.capture`: ``record_shapes``, ``with_stack``, ``with_flops``), their
matching to operator events with the memory check and the trace args
(:mod:`~pyprof.attribution.matching`), FLOPs and bytes per operator call from the shared table
``pyprof/spec/flops.json`` (:mod:`~pyprof.attribution.flops`), folded stacks for flame graphs
(:mod:`~pyprof.attribution.flamegraph`) and the machine's peaks for a roofline
(:mod:`~pyprof.attribution.peaks`); :mod:`~pyprof.attribution.cli` holds the commands."""
