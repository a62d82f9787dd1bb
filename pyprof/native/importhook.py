"""Run code right after a module has executed, whenever it is first imported.

pyprof patches two MXNet modules at import time, before user code can use them: ``mxnet.base``
(its ``_LIB`` goes behind the API gate) and ``mxnet.engine`` (per-operator mode keeps bulking
off). :class:`AfterImport` is the one meta-path finder both use.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


class AfterImport:
    """A meta-path finder that calls ``then(module)`` right after ``fullname`` executes.

    :meth:`install` puts it first on ``sys.meta_path`` (once); it finds the module with the
    other finders and wraps the loader's ``exec_module``.
    """

    def __init__(self, fullname: str, then: Callable[[Any], None]) -> None:
        self.fullname = fullname
        self.then = then

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.fullname:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                exec_module = spec.loader.exec_module
                then = self.then

                def exec_then(module: Any, _exec: Any = exec_module) -> None:
                    _exec(module)
                    then(module)
                spec.loader.exec_module = exec_then  # type: ignore[method-assign]
                return spec
        return None
