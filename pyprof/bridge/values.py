"""Values and errors across the JPype bridge, exactly, both ways (``pyprof.jvm`` uses this).

=====================  ==========================================  ===========================
Python                 Clojure / Java                              back in Python
=====================  ==========================================  ===========================
``None``               ``nil``                                     ``None``
``bool``               ``Boolean/TRUE``, ``Boolean/FALSE``         ``bool``
``int`` (-2^63..2^63)  ``Long``                                    ``int``
``int`` (beyond)       ``clojure.lang.BigInt`` (2^64-1, 2^70 ...)  ``int``
``float``              ``Double``                                  ``float``
``Fraction``           ``clojure.lang.Ratio``                      ``Fraction``
``Decimal``            ``BigDecimal``                              ``Decimal``
``str``                ``String`` (non-BMP characters as pairs)    ``str``
:class:`Keyword`       keyword (``:cpu``, ``:pyprof/error``)        :class:`Keyword`
``dict``               map (a ``str`` key becomes a keyword)       ``dict``
:class:`StringKey`     a map's string key (``"filename"``)         :class:`StringKey`
``list``, ``tuple``    vector (a Clojure list or seq: a ``list``)  ``list``
``set``, frozenset     set                                         ``set``
=====================  ==========================================  ===========================

A Java ``Integer``, ``Short`` or ``Byte`` arrives as ``int``, ``Float`` as ``float``, ``BigInteger``
as ``int``; a JPype object passed in (``java.lang.Boolean`` included) goes back unchanged. So a
value the JVM made comes back equal (``clojure.core/=``) and printed the same after a round trip
through Python, and a Python value comes back equal, with the same types.

:func:`translate_exception` turns a JVM error of pyprof (``:pyprof/error`` in its ex-data) into the
Python class api.json ``error_kinds`` names for its kind, with ``.code``, ``.fix`` and ``.fields``
as :func:`pyprof.rules.error` sets them; ``MXNetException`` becomes :class:`MXNetError` with
``.function`` and ``.mxnet_message``.
"""

from __future__ import annotations

import decimal
import fractions
from typing import Any

from .. import errors, rules


class Keyword(str):
    """A Clojure keyword seen from Python: equal to its name (``Keyword("cpu") == "cpu"``),
    and a keyword again when passed back, so Clojure data round-trips unchanged."""

    __slots__ = ()

    def __repr__(self) -> str:
        return ":" + str.__str__(self)


class StringKey(str):
    """A string key of a Clojure map seen from Python (``(current-config)`` has them): equal to
    the ``str``, and a string key again when passed back (a plain ``str`` key becomes a
    keyword), so such maps round-trip unchanged."""

    __slots__ = ()


def _java(name: str) -> Any:
    import jpype

    return jpype.JClass(name)


def to_clojure(x: Any) -> Any:
    """Python data -> Clojure data (see the module's table; plain ``str`` dict keys become
    keywords)."""
    import jpype

    if x is None or isinstance(x, jpype.JObject):
        return x
    if isinstance(x, Keyword):
        return _java("clojure.lang.Keyword").intern(str.__str__(x))
    if isinstance(x, str):
        try:
            return jpype.JString(str.__str__(x))
        except UnicodeEncodeError:  # a lone surrogate (os.listdir of a non-UTF-8 name): a Java
            points = jpype.JArray(jpype.JInt)([ord(c) for c in x])  # string holds it, and the
            return _java("java.lang.String")(points, 0, len(x))  # JVM's checks name it
    if isinstance(x, bool):
        boolean = _java("java.lang.Boolean")
        return boolean.TRUE if x else boolean.FALSE
    if isinstance(x, int):
        if -(1 << 63) <= x < (1 << 63):
            return _java("java.lang.Long").valueOf(int(x))
        # beyond a long (a counter value up to 2**64-1, 2**70): a BigInt, exactly
        return _java("clojure.lang.BigInt").fromBigInteger(_java("java.math.BigInteger")(str(int(x))))
    if isinstance(x, float):
        return _java("java.lang.Double").valueOf(float(x))
    if isinstance(x, fractions.Fraction):
        big = _java("java.math.BigInteger")
        return _java("clojure.lang.Numbers").divide(big(str(x.numerator)), big(str(x.denominator)))
    if isinstance(x, decimal.Decimal):
        return _java("java.math.BigDecimal")(str(x))
    if isinstance(x, dict):
        kw = _java("clojure.lang.Keyword")
        flat = []
        for k, v in x.items():  # a str key (a Keyword too) -> keyword; a StringKey -> string
            key = kw.intern(str.__str__(k)) if isinstance(k, str) and \
                not isinstance(k, StringKey) else to_clojure(k)
            flat += [key, to_clojure(v)]
        return _java("clojure.lang.PersistentArrayMap").createAsIfByAssoc(
            jpype.JArray(jpype.JObject)(flat))
    if isinstance(x, (list, tuple)):
        return _java("clojure.lang.PersistentVector").create([to_clojure(v) for v in x])
    if isinstance(x, (set, frozenset)):
        return _java("clojure.lang.PersistentHashSet").create([to_clojure(v) for v in x])
    return x


def to_python(x: Any) -> Any:
    """Clojure data -> Python data (see the module's table)."""
    import jpype

    if x is None:
        return None
    if not isinstance(x, jpype.JObject):  # already Python (JPype converted it)
        if isinstance(x, bool):
            return bool(x)
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            return float(x)
        return x
    J = _java
    if isinstance(x, J("java.lang.Boolean")):
        return bool(x.booleanValue())
    if isinstance(x, J("java.lang.String")):
        try:
            return str(x)
        except UnicodeDecodeError:  # a lone surrogate, which a Python str holds too
            return "".join(map(chr, x.codePoints().toArray()))
    if isinstance(x, J("clojure.lang.Keyword")):
        return Keyword(str(x.toString())[1:])  # keeps a namespace: "pyprof/error"
    if isinstance(x, (J("java.lang.Long"), J("java.lang.Integer"), J("java.lang.Short"),
                      J("java.lang.Byte"))):
        return int(x.longValue())
    if isinstance(x, (J("clojure.lang.BigInt"), J("java.math.BigInteger"))):
        return int(str(x.toString()))  # exactly: 2**64-1 is no -1
    if isinstance(x, J("clojure.lang.Ratio")):
        return fractions.Fraction(int(str(x.numerator.toString())),
                                  int(str(x.denominator.toString())))
    if isinstance(x, J("java.math.BigDecimal")):
        return decimal.Decimal(str(x.toString()))
    if isinstance(x, J("java.lang.Number")):
        return float(x.doubleValue())
    if isinstance(x, J("java.lang.Character")):
        return str(x.toString())
    if isinstance(x, J("java.util.Map")):
        return {_key(e.getKey()): to_python(e.getValue()) for e in x.entrySet()}
    if isinstance(x, J("java.util.Set")):
        items = [to_python(v) for v in x]
        try:
            return set(items)
        except TypeError:  # an unhashable item (a map): the items as a list
            return items
    if isinstance(x, J("java.util.Collection")):
        return [to_python(v) for v in x]
    return x


def _key(k: Any) -> Any:
    """A map key: a string key marked (:class:`StringKey`), so it goes back as a string."""
    v = to_python(k)
    return StringKey(v) if type(v) is str else v


#: Keys of a JVM error's ex-data that are no field of its catalogue entry.
RESERVED_DATA_KEYS = ("pyprof/error", "pyprof/code", "fix", "java-fix")


def translate_exception(exc: Any) -> Exception | None:
    """The pyprof error for a JVM-side pyprof exception (an ex-info with ``:pyprof/error`` of a
    kind api.json ``error_kinds`` lists, ``pyprof.jvm.MXNetException`` included), else None.

    Its class is the kind's Python class (api.json); it carries ``.code`` (``:pyprof/code``, None
    outside the catalogue), ``.fix`` (the fix its message ends in: the Clojure calls, or the
    Java ones for an error of the Java facade) and ``.fields`` (the ex-data without
    ``RESERVED_DATA_KEYS``, string keys), as :func:`pyprof.rules.error` sets them, and the whole
    ex-data on ``.data``. A kind-``mxnet`` error is :class:`MXNetError` (``.function``,
    ``.mxnet_message``) with Python's message.
    """
    if not isinstance(exc, _java("clojure.lang.IExceptionInfo")):
        return None
    data = to_python(exc.getData()) or {}
    kind = data.get("pyprof/error")
    names = rules.API["error_kinds"].get(str(kind)) if isinstance(kind, str) else None
    if names is None:
        return None
    cls = getattr(errors, names["python"])
    message = str(exc.getMessage()) if exc.getMessage() is not None else ""
    if issubclass(cls, errors.MXNetError):
        function = data.get("fn", exc.function() if isinstance(
            exc, _java("pyprof.jvm.MXNetException")) else "")
        out: Exception = cls(str(function), str(data.get("mxnet-error", "")))
    else:
        out = cls(message)
    text = str(out)
    fixes = [str(f) for f in (data.get("fix"), data.get("java-fix")) if isinstance(f, str)]
    fix = next((f for f in fixes if text.endswith(f" fix: {f}")), None)
    if fix is None and " fix: " in text:
        fix = text.rsplit(" fix: ", 1)[1]
    if fix is None and isinstance(out, errors.MXNetError):
        fix = out.hint
    out.code = str(data["pyprof/code"]) if data.get("pyprof/code") is not None else None  # type: ignore[attr-defined]
    out.fix = fix  # type: ignore[attr-defined]
    out.fields = {str(k): v for k, v in data.items() if k not in RESERVED_DATA_KEYS}  # type: ignore[attr-defined]
    out.data = data  # type: ignore[attr-defined]
    return out
