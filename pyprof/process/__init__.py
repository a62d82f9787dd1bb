"""What is one per process, shared by the profiler API and sessions: what this process asked
of MXNet's profiler singleton (:mod:`~pyprof.process.tracker`), the trace file's kept parts
(:mod:`~pyprof.process.keep_file`), the output root and the paths under it
(:mod:`~pyprof.process.output`), and how many worker processes a file reader may fork
(:mod:`~pyprof.process.workers`). Package-internal.
"""
