"""The JPype bridge's entry: the JVM layer (``jvm/``) loaded into this Python process
(docs/jvm.md).

``start()`` binds one JVM to the libmxnet Python already loaded, joins the two API gates and
lends Python's tracker to the JVM; ``require``, ``call`` and ``eval_clojure`` call Clojure, with
values and errors crossing exactly. The implementation is the package :mod:`pyprof.bridge`
(``host``, ``tracker``, ``metadata``, ``values``, ``signals``). ``stale_reason``, ``jvm_dir``,
``Namespace``, ``StringKey``, ``to_clojure``, ``to_python`` and ``translate_exception`` stay
importable here, as package-internal.
"""

from .bridge.host import (Keyword, Namespace, StringKey, call, classpath, eval_clojure, is_running,
                          jvm_dir, require, shutdown, stale_reason, start, to_clojure, to_python,
                          translate_exception)

__all__ = ["start", "shutdown", "is_running", "require", "call", "eval_clojure", "classpath",
           "Keyword"]
