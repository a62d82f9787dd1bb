"""The JPype bridge, package-internal: its entry is :mod:`pyprof.jvm`.

:mod:`~pyprof.bridge.host` starts the one JVM of the process and calls Clojure;
:mod:`~pyprof.bridge.tracker` and :mod:`~pyprof.bridge.metadata` lend Python's tracker and
metadata store to the JVM; :mod:`~pyprof.bridge.values` carries values and errors across exactly;
:mod:`~pyprof.bridge.signals` keeps Ctrl+C working while Python waits inside the JVM.
"""
