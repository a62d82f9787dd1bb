"""Operators from MXNet's registry (C API ``MXListAllOpNames``) and their benchmark categories.

Categories follow opperf's: explicit lists where a category is a matter of meaning (gemm,
indexing, NN ...), rules on names and argument names where it is a matter of form (binary
broadcast ``broadcast_*(lhs, rhs)``, reductions over ``data, axis, exclude, keepdims``, unary
functions of one ``data`` array). Internal (``_*``), contrib and backward operators are never
benchmarked directly; a forward operator ``X`` has a backward when ``_backward_X`` is registered
or autograd can differentiate it (found out at run time).
"""

from __future__ import annotations

import dataclasses
import functools
import re

from ..native import capi as _capi
from .. import rules


# Category name -> explicit operators; categories with rules are filled by categorize().
_EXPLICIT: dict[str, tuple[str, ...]] = {
    "gemm": ("dot", "batch_dot", "khatri_rao"),
    "sorting_searching": ("sort", "argsort", "topk", "argmax", "argmin", "argmax_channel"),
    "indexing": ("slice", "slice_axis", "crop", "take", "batch_take", "pick",
                 "one_hot", "gather_nd", "scatter_nd", "ravel_multi_index", "unravel_index",
                 "choose_element_0index", "fill_element_0index"),
    "rearrange": ("transpose", "swapaxes", "SwapAxis", "flip", "reverse", "depth_to_space",
                  "space_to_depth"),
    "shape": ("reshape", "Reshape", "flatten", "Flatten", "squeeze",
              "shape_array", "size_array"),
    "expanding": ("broadcast_axes", "broadcast_axis", "broadcast_to",
                  "expand_dims", "pad", "Pad", "repeat", "tile"),
    "rounding": ("round", "rint", "fix", "floor", "ceil", "trunc"),
    "join_split": ("concat", "Concat", "stack", "split", "SliceChannel"),
    "nn_basic": ("FullyConnected", "Dropout", "BatchNorm", "LayerNorm", "InstanceNorm",
                 "GroupNorm", "L2Normalization", "LRN", "Embedding", "RNN", "SoftmaxOutput",
                 "Softmax", "LinearRegressionOutput", "LogisticRegressionOutput",
                 "MAERegressionOutput", "SVMOutput", "Correlation", "SpatialTransformer",
                 "GridGenerator", "BilinearSampler", "im2col", "col2im", "UpSampling"),
    "nn_activation": ("Activation", "LeakyReLU", "softmax", "log_softmax", "softmin",
                      "SoftmaxActivation", "hard_sigmoid"),
    "nn_pooling": ("Pooling", "ROIPooling"),
    "nn_conv": ("Convolution",),
    "nn_transpose_conv": ("Deconvolution",),
    "loss": ("smooth_l1", "softmax_cross_entropy", "CTCLoss", "ctc_loss", "MakeLoss",
             "make_loss"),
    "misc": ("where", "clip", "cast", "Cast", "amp_cast", "amp_multicast", "cast_storage",
             "add_n", "ElementWiseSum", "BlockGrad", "stop_gradient", "identity", "zeros_like",
             "ones_like", "SequenceLast", "SequenceMask", "SequenceReverse", "diag", "cumsum",
             "reset_arrays", "IdentityAttachKLSparseReg"),
}

#: Every category, in the order a full run visits them.
CATEGORIES: tuple[str, ...] = (
    "unary", "binary_broadcast", "binary_elemwise", "binary_misc", "gemm", "random",
    "reduction", "sorting_searching", "indexing", "rearrange", "shape", "expanding", "rounding",
    "join_split", "nn_basic", "nn_activation", "nn_pooling", "nn_conv", "nn_transpose_conv",
    "optimizer", "loss", "linalg", "misc",
)

# Superseded operators opperf skips too, and operators that need user code to exist.
_SKIP = {"Convolution_v1": "deprecated (Convolution)", "Pooling_v1": "deprecated (Pooling)",
         "BatchNorm_v1": "deprecated (BatchNorm)", "Crop": "deprecated (slice, crop)",
         "Custom": "runs a user-registered Python operator; nothing to benchmark by default",
         "IdentityAttachKLSparseReg": "takes an auxiliary state (moving_avg) that its registered "
                                      "argument list does not name"}

_OPTIMIZER = re.compile(r"_update(_phase[12])?$|^(multi_)?all_finite$|^multi_(sum_sq|lars)$")


@dataclasses.dataclass(frozen=True)
class Operator:
    """A registered operator: ``arguments`` as (name, type text) in MXNet's order."""

    name: str
    arguments: tuple[tuple[str, str], ...]
    has_backward_op: bool

    @property
    def arg_names(self) -> list[str]:
        return [n for n, _ in self.arguments]

    @property
    def array_args(self) -> list[str]:
        """Arguments that take arrays (``NDArray-or-Symbol``, lists of them, ``NDArray``)."""
        return [n for n, t in self.arguments if t.startswith(("NDArray", "Symbol"))]

    @property
    def required_params(self) -> list[str]:
        return [n for n, t in self.arguments
                if not t.startswith(("NDArray", "Symbol")) and "required" in t]


@functools.lru_cache(maxsize=1)
def _registry() -> dict[str, Operator]:
    import mxnet as mx  # the argument lists come from MXSymbolGetAtomicSymbolInfo

    names = _capi.list_all_op_names()
    backward = {n[len("_backward_"):] for n in names if n.startswith("_backward_")}
    out = {}
    for name in sorted(names):
        if name.startswith("_"):
            continue
        info = mx.operator.get_operator_arguments(name)
        out[name] = Operator(name, tuple(zip(info.names, info.types)), name in backward)
    return out


def operators() -> dict[str, Operator]:
    """Every public registered operator (no ``_*``, ``_contrib_*``, ``_backward_*``), by name."""
    return dict(_registry())


def categorize(op: Operator) -> str | None:
    """The category of ``op``, or None when no benchmark covers it."""
    if op.name in _SKIP:
        return None
    for cat, names in _EXPLICIT.items():
        if op.name in names:
            return cat
    arrays = op.array_args
    if op.name.startswith("linalg_"):
        return "linalg"
    if op.name.startswith(("random_", "sample_")) or op.name in ("normal", "uniform", "shuffle"):
        return "random"
    if _OPTIMIZER.search(op.name):
        return "optimizer"
    if {"data", "axis", "exclude", "keepdims"} <= set(op.arg_names) or op.name in ("norm", "moments"):
        return "reduction"
    if arrays == ["lhs", "rhs"] or op.name == "slice_like":
        if op.name.startswith("broadcast_"):
            return "binary_broadcast"
        if op.name.startswith("elemwise_"):
            return "binary_elemwise"
        return "binary_misc"
    if arrays == ["data"] and not op.required_params:
        return "unary"
    return None


@functools.lru_cache(maxsize=1)
def by_category() -> dict[str, list[str]]:
    """Category -> operator names (sorted), for every category in :data:`CATEGORIES`."""
    out: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for op in _registry().values():
        cat = categorize(op)
        if cat is not None:
            out[cat].append(op.name)
    return out


def without_benchmark() -> dict[str, str]:
    """Registered public operators that no category covers, with the reason."""
    out = {}
    for op in _registry().values():
        if categorize(op) is None:
            out[op.name] = _SKIP.get(op.name, "no category and no default inputs")
    return out


def resolve(op: str | object) -> str:
    """An operator name from a name or an ``mx.nd`` function (``mx.nd.dot`` -> ``dot``)."""
    if isinstance(op, str):
        return op
    name = getattr(op, "__name__", None)
    if not name:
        raise rules.error("bench.op_type", op=op)
    return name
