"""One source of the C declarations: pyprof/spec/capi.json.

Checked here: the spec against the headers of the installed wheel (mxnet/include/mxnet/c_api.h,
nnvm/c_api.h, parsed from their text), Python's ctypes declarations against the spec (by ABI:
pointer depth, size and signedness, not by re-running _capi's own mapping), and that every bound
function has a user in each language that binds it. The JVM's Natives are checked against the
same spec by jvm/test/pyprof/capi_spec_test.clj. Each check is a function that returns the
problems it found, and each is shown to find a planted break.
"""

from __future__ import annotations

import copy
import ctypes
import re
from pathlib import Path

import pytest

from pyprof.native import capi as _capi
from pyprof import rules

ROOT = Path(__file__).resolve().parent.parent
SPEC = rules.spec("capi.json")
LANGUAGES = {"python", "jvm", "example"}

# The C numbers of the spec, by what the ABI needs: (size in bytes, signed) on x86-64 Linux.
NUMBERS = {"int": (4, True), "uint32_t": (4, False), "int64_t": (8, True),
           "uint64_t": (8, False), "size_t": (8, False)}


# ---------------------------------------------------------------------- the header's text

def spelled(c: str) -> str:
    """A C type with spaces only between words: 'const char * const *' -> 'const char* const*'."""
    out = ""
    for tok in re.findall(r"\w+|\*", c):
        out += tok if tok == "*" or not out else " " + tok
    return out


def resolve(c: str, typedefs: dict[str, str]) -> tuple[str, int]:
    """(base, pointer depth) of a C type: const dropped, typedefs resolved."""
    flat = re.sub(r"\bconst\b|\s", "", c)
    base = flat.rstrip("*")
    depth = len(flat) - len(base)
    if base in typedefs:
        inner, more = resolve(typedefs[base], typedefs)
        return inner, depth + more
    return base, depth


def parse_header(text: str) -> tuple[dict[str, tuple[str, list[tuple[str, str]]]], dict[str, str]]:
    """The exported declarations (``MXNET_DLL``/``NNVM_DLL`` ret Name(args);) of a header, as
    name -> (return type, [(type, name)]), and its plain typedefs, name -> type."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    decls: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for m in re.finditer(r"\b(?:MXNET|NNVM)_DLL\s+([\w\s*]*?)\b(\w+)\s*\(([^)]*)\)\s*;", text):
        ret, name, raw = m.groups()
        args = []
        if raw.strip() not in ("", "void"):
            for a in raw.split(","):
                t, n = re.fullmatch(r"\s*(.*?)\b(\w+)\s*", a, flags=re.S).groups()
                args.append((spelled(t), n))
        decls.setdefault(name, (spelled(ret), args))
    typedefs = {n: spelled(t) for t, n in
                re.findall(r"\btypedef\s+([\w\s*]+?)\s*\b(\w+)\s*;", text)}
    return decls, typedefs


@pytest.fixture(scope="module")
def headers() -> dict[str, tuple[dict, dict]]:
    """Each header the spec names, parsed, from the package directory of the loaded libmxnet."""
    package = Path(_capi.library_path()).parent
    names = {SPEC["default_header"]} | {f["header"] for f in SPEC["functions"].values()
                                        if "header" in f}
    out = {}
    for h in sorted(names):
        path = package / h
        assert path.is_file(), f"{path}: the wheel's header is missing"
        out[h] = parse_header(path.read_text(encoding="utf-8", errors="replace"))
    return out


def header_problems(spec: dict, headers: dict[str, tuple[dict, dict]]) -> list[str]:
    """Where the spec differs from the headers: a missing function, another return type, another
    argument count, an argument's type (after typedefs) or name, a typedef."""
    problems = []
    all_typedefs = {k: v for _decls, tds in headers.values() for k, v in tds.items()}
    for name, t in spec["typedefs"].items():
        if all_typedefs.get(name) != t:
            problems.append(f"typedef {name}: spec {t!r}, header {all_typedefs.get(name)!r}")
    for name, f in spec["functions"].items():
        h = f.get("header", spec["default_header"])
        decls, tds = headers[h]
        if name not in decls:
            problems.append(f"{name}: not declared in {h}")
            continue
        ret, args = decls[name]
        if resolve(f["returns"], spec["typedefs"]) != resolve(ret, tds):
            problems.append(f"{name}: returns {f['returns']!r} in the spec, {ret!r} in {h}")
        if len(f["args"]) != len(args):
            problems.append(f"{name}: {len(f['args'])} arguments in the spec, {len(args)} in {h}")
            continue
        for i, (s, (ht, hn)) in enumerate(zip(f["args"], args)):
            if resolve(s[0], spec["typedefs"]) != resolve(ht, tds) or s[1] != hn:
                problems.append(f"{name} argument {i}: spec {s[0]} {s[1]}, {h} {ht} {hn}")
    return problems


def test_the_header_parser_reads_declarations_as_written():
    decls, tds = parse_header("""
        typedef void *ProfileHandle;  /* a handle */
        typedef uint32_t mx_uint;
        typedef void (*Callback)(void*);
        // MXNET_DLL int Commented(int a);
        MXNET_DLL const char *MXGetLastError();
        MXNET_DLL int MXSetProcessProfilerConfig(int num_params, const char* const* keys,
                                                 const char* const* vals,
                                                 KVStoreHandle kvstoreHandle);
        NNVM_DLL int NNGetOpHandle(const char* op_name,
                                   OpHandle* op_out);
        MXNET_DLL int MXNDArrayWaitAll(void);
    """)
    assert decls == {
        "MXGetLastError": ("const char*", []),
        "MXSetProcessProfilerConfig": ("int", [("int", "num_params"), ("const char* const*", "keys"),
                                               ("const char* const*", "vals"),
                                               ("KVStoreHandle", "kvstoreHandle")]),
        "NNGetOpHandle": ("int", [("const char*", "op_name"), ("OpHandle*", "op_out")]),
        "MXNDArrayWaitAll": ("int", []),
    }
    assert tds == {"ProfileHandle": "void*", "mx_uint": "uint32_t"}
    assert resolve("ProfileHandle*", tds) == ("void", 2)
    assert resolve("const char* const*", tds) == ("char", 2)


def test_the_spec_is_what_the_installed_headers_declare(headers):
    assert header_problems(SPEC, headers) == []
    # The header really holds what the check reads: 41 functions, the handles as void*.
    assert len(SPEC["functions"]) == 41
    assert headers[SPEC["default_header"]][1]["ProfileHandle"] == "void*"


def test_the_header_check_finds_a_planted_break(headers):
    broken = copy.deepcopy(SPEC)
    broken["functions"]["MXProfileSetCounter"]["args"][1][0] = "int64_t"  # C says uint64_t
    broken["functions"]["MXGetVersion"]["returns"] = "const char*"
    broken["functions"]["MXDumpProcessProfile"]["args"].pop()
    broken["typedefs"]["ProfileHandle"] = "void**"
    problems = header_problems(broken, headers)
    assert "MXProfileSetCounter argument 1: spec int64_t value, include/mxnet/c_api.h uint64_t value" in problems
    assert "MXGetVersion: returns 'const char*' in the spec, 'int' in include/mxnet/c_api.h" in problems
    assert "MXDumpProcessProfile: 2 arguments in the spec, 3 in include/mxnet/c_api.h" in problems
    assert "typedef ProfileHandle: spec 'void**', header 'void*'" in problems
    # ProfileHandle as void** changes every profiler-object argument too.
    assert any(p.startswith("MXProfileCreateDomain argument 1:") for p in problems)


# ---------------------------------------------------------------------- Python's declarations

def abi(t) -> tuple:
    """What a ctypes type is to the C ABI: ('char', depth) / ('void', depth) for c_char_p /
    c_void_p under depth-1 POINTERs, else (size, signed, depth) of the number pointed to."""
    depth = 0
    while isinstance(getattr(t, "_type_", None), type):  # POINTER(x)._type_ is x
        t, depth = t._type_, depth + 1
    if t is ctypes.c_char_p:
        return ("char", depth + 1)
    if t is ctypes.c_void_p:
        return ("void", depth + 1)
    return (ctypes.sizeof(t), t(-1).value < 0, depth)


def expected_abi(c: str, typedefs: dict[str, str]) -> tuple:
    base, depth = resolve(c, typedefs)
    if base in ("char", "void") and depth:
        return (base, depth)
    return (*NUMBERS[base], depth)


def python_problems(spec: dict, declared: dict[str, tuple[list, object]]) -> list[str]:
    """Where Python's ctypes declarations differ from the spec's Python functions."""
    want = {n for n, f in spec["functions"].items() if "python" in f["languages"]}
    problems = [f"{n}: declared in Python, not listed for python in capi.json"
                for n in sorted(set(declared) - want)]
    problems += [f"{n}: listed for python in capi.json, not declared" for n in sorted(want - set(declared))]
    for name in sorted(want & set(declared)):
        f, (argtypes, restype) = spec["functions"][name], declared[name]
        if abi(restype) != expected_abi(f["returns"], spec["typedefs"]):
            problems.append(f"{name}: restype {restype.__name__} is not {f['returns']}")
        if len(argtypes) != len(f["args"]):
            problems.append(f"{name}: {len(argtypes)} argtypes, {len(f['args'])} in the spec")
            continue
        for i, (t, a) in enumerate(zip(argtypes, f["args"])):
            if abi(t) != expected_abi(a[0], spec["typedefs"]):
                problems.append(f"{name} argument {i} ({a[1]}): argtype {t.__name__} is not {a[0]}")
    return problems


def test_abi_of_the_ctypes_types_is_read_correctly():
    assert abi(ctypes.c_uint64) == (8, False, 0)
    assert abi(ctypes.c_int64) == (8, True, 0)
    assert abi(ctypes.POINTER(ctypes.c_uint32)) == (4, False, 1)
    assert abi(ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p))) == ("char", 3)
    assert abi(ctypes.POINTER(ctypes.c_void_p)) == ("void", 2)
    assert expected_abi("const char***", {}) == ("char", 3)
    assert expected_abi("ProfileHandle*", SPEC["typedefs"]) == ("void", 2)


def test_python_declares_exactly_the_spec():
    declared = _capi.declarations()
    assert python_problems(SPEC, declared) == []
    # Real values: the two a reader of the header would check first.
    args, ret = declared["MXSetProcessProfilerConfig"]
    assert ret is ctypes.c_int and args[1] is ctypes.POINTER(ctypes.c_char_p)
    assert declared["MXGetLastError"] == ([], ctypes.c_char_p)
    assert declared["MXProfileSetCounter"][0][1] is ctypes.c_uint64


def test_the_python_check_finds_a_planted_break():
    declared = _capi.declarations()
    broken = copy.deepcopy(declared)
    args, ret = broken["MXProfileAdjustCounter"]
    broken["MXProfileAdjustCounter"] = ([args[0], ctypes.c_uint64], ret)  # C says int64_t
    broken["MXGetLastError"] = ([], ctypes.c_int)
    del broken["MXNDArrayWaitAll"]
    broken["MXNDArrayCreate"] = ([], ctypes.c_int)
    assert python_problems(SPEC, broken) == [
        "MXNDArrayCreate: declared in Python, not listed for python in capi.json",
        "MXNDArrayWaitAll: listed for python in capi.json, not declared",
        "MXGetLastError: restype c_int is not const char*",
        "MXProfileAdjustCounter argument 1 (value): argtype c_ulong is not int64_t",
    ]
    spec = copy.deepcopy(SPEC)
    spec["functions"]["MXProfileSetCounter"]["args"][1][0] = "int"
    assert python_problems(spec, declared) == [
        "MXProfileSetCounter argument 1 (value): argtype c_ulong is not int"]


def test_python_declarations_follow_an_edited_spec():
    # One source: _capi's mapping turns the spec's spelling into the ctypes type.
    assert _capi.ctype_of("const char* const*") is ctypes.POINTER(ctypes.c_char_p)
    assert _capi.ctype_of("ProfileHandle*") is ctypes.POINTER(ctypes.c_void_p)
    assert _capi.ctype_of("uint32_t*") is ctypes.POINTER(ctypes.c_uint32)
    assert _capi.ctype_of("size_t") is ctypes.c_size_t
    assert _capi.c_type("NDArrayHandle**") == ("void", 3)


# ---------------------------------------------------------------------- the spec's own shape

def test_every_function_names_its_languages_and_why_only_one():
    for name, f in SPEC["functions"].items():
        langs = set(f["languages"])
        assert langs and langs <= LANGUAGES, name
        assert ("why" in f) == (len(langs) == 1), f"{name}: a 'why' exactly where one language binds it"
        for a in f["args"]:
            assert len(a) == 2 or (len(a) == 3 and a[2] == "out"), f"{name}: {a}"
            assert a[0] == spelled(a[0]), f"{name}: {a[0]!r} is not spelled as the grammar says"


# ---------------------------------------------------------------------- every binding is used

def _sources(*parts: str, exts: tuple[str, ...]) -> dict[Path, str]:
    base = ROOT.joinpath(*parts)
    return {p: p.read_text(encoding="utf-8") for p in sorted(base.rglob("*"))
            if p.suffix in exts and p.is_file()}


def unused(spec: dict) -> list[str]:
    """The bound functions with no call in a language that binds them. Python: a call by name
    through _capi (fn/call/_fns[...]/create_profile_object/a profiler object's constructor).
    JVM (the library and examples/matmul): `(mx Name ...)` or `LibMXNet.Name(` outside the capi
    package, or a use of the native
    inside LibMXNet.java other than its own wrapper (the loader's version check, the error text).
    The example's own binding (pyprof.jvm.example.MXNet): `MXNet.Name(` or `MXNet/Name` in
    examples/matmul outside that class."""
    py = "\n".join(_sources("pyprof", exts=(".py",)).values())
    # the library binds what the dot example (examples/matmul, out of the library) calls too
    jvm_files = {**_sources("jvm", "src", exts=(".clj", ".java")),
                 **_sources("examples", "matmul", exts=(".clj", ".java"))}
    capi = "pyprof/jvm/capi/"
    outside = "\n".join(t for p, t in jvm_files.items() if capi not in p.as_posix())
    libmx = (ROOT / "jvm/src/java/pyprof/jvm/capi/LibMXNet.java").read_text(encoding="utf-8")
    example = "\n".join(t for p, t in jvm_files.items()
                        if "examples/matmul" in p.as_posix() and p.name != "MXNet.java")
    out = []
    for name, f in spec["functions"].items():
        n = re.escape(name)
        if "python" in f["languages"] and not re.search(
                rf'(?:\bfn\(|\b_fn\(|\bcall\(|_fns\[|create_profile_object\(|__init__\(name,)\s*"{n}"', py):
            out.append(f"{name}: no Python user")
        if "jvm" in f["languages"]:
            wrapper = 1 if re.search(rf"public static void {n}\(", libmx) else 0
            inside = len(re.findall(rf"\bNatives\.{n}\(", libmx)) > wrapper
            if not (inside or re.search(rf"\(mx {n}\b|\bLibMXNet\.{n}\(", outside)):
                out.append(f"{name}: no JVM user")
        if "example" in f["languages"] and not re.search(rf"\bMXNet[./]{n}\b", example):
            out.append(f"{name}: no example user")
    return out


def test_every_bound_function_has_a_user_in_each_language_that_binds_it():
    assert unused(SPEC) == []
    broken = copy.deepcopy(SPEC)
    broken["functions"]["MXListAllOpNames"]["languages"] = ["python", "jvm"]
    broken["functions"]["MXExecutorForward"]["languages"] = ["jvm", "python"]
    broken["functions"]["MXGetVersion"]["languages"] = ["example"]
    assert unused(broken) == ["MXGetVersion: no example user", "MXListAllOpNames: no JVM user",
                              "MXExecutorForward: no Python user"]
