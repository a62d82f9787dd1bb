"""The native boundary: the only code that calls libmxnet.

:mod:`~pyprof.native.capi` loads libmxnet (ctypes), declares the C signatures and checks every
return code; :mod:`~pyprof.native.gate` is the API gate every call passes;
:mod:`~pyprof.native.importhook` guards MXNet's own Python front end once it is imported.
Package-internal: the public API is :mod:`pyprof.profiler` and :mod:`pyprof.session`.
"""
