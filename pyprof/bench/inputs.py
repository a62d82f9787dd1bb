"""The one table of default inputs, by argument name, with operator-specific rows.

Every benchmark input comes from here: :data:`DEFAULTS` maps an argument name to a list of
*variants* (one benchmark case each), :data:`OPERATOR_INPUTS` overrides or adds arguments for
operators with shape or value constraints, and :data:`LARGE_TENSOR` swaps in shapes with more
than 2**31 elements (opperf's ``--int64-tensor on``; needs a build with large-tensor support).

An argument whose list is shorter than the longest one keeps its first value for every case
(e.g. ``lr`` for all shapes of an optimizer). A :class:`Tensor` becomes an NDArray made with
a fixed seed; anything else is passed as the operator's parameter unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Tensor:
    """An input array: ``shape``; values drawn by ``fill``.

    fill: ``uniform`` in [low, high) (default [0.1, 0.9), valid for every unary function's
    domain), ``normal`` (mean 0, sd 1), ``int`` integers in [low, high) (indices, labels),
    ``spd`` a batch of symmetric positive-definite matrices (last two axes), ``lower`` lower
    triangular with a dominant diagonal (linear solves). ``dtype`` None means the run's dtype.
    ``grad`` False: never attach a gradient (indices, labels, optimizer states).
    """

    shape: tuple[int, ...]
    fill: str = "uniform"
    low: float = 0.1
    high: float = 0.9
    dtype: str | None = None
    grad: bool = True

    def describe(self) -> list[int] | dict[str, Any]:
        """JSON form for reports: the shape, plus what differs from a plain float tensor."""
        extra = {k: v for k, v in (("fill", self.fill), ("dtype", self.dtype))
                 if v not in ("uniform", None)}
        return {"shape": list(self.shape), **extra} if extra else list(self.shape)


def T(*shape: int, **kw: Any) -> Tensor:  # noqa: N802 - reads like a shape in the table
    return Tensor(tuple(shape), **kw)


def Idx(*shape: int, high: int) -> Tensor:  # noqa: N802
    """Integer indices in [0, high), no gradient."""
    return Tensor(tuple(shape), fill="int", low=0, high=high, grad=False)


def State(*shape: int, **kw: Any) -> Tensor:  # noqa: N802
    """An optimizer state or label: float values, no gradient."""
    return Tensor(tuple(shape), grad=False, **kw)


# -- the table -------------------------------------------------------------------------------
# Two default variants per general argument: a square matrix and a tall, skinny one (the second
# pair of lhs/rhs also exercises broadcasting). 512x512 float32 is 1 MiB: a full run over every
# category fits in minutes on two cores.

DEFAULTS: dict[str, list[Any]] = {
    "data": [T(512, 512), T(16384, 16)],
    "lhs": [T(512, 512), T(16384, 16)],
    "rhs": [T(512, 512), T(16384, 1)],
    # random sampling / pdf
    "low": [0.0], "high": [1.0], "mu": [0.0], "sigma": [1.0], "lam": [1.0],
    "alpha": [1.0], "beta": [1.0], "k": [1], "p": [0.5],
    "shape": [(512, 512), (16384, 16)],
    # optimizers (weight/grad/states share the data shapes)
    "weight": [T(512, 512), T(16384, 16)],
    "grad": [State(512, 512), State(16384, 16)],
    "mom": [State(512, 512), State(16384, 16)],
    "mean": [State(512, 512), State(16384, 16)],
    "var": [State(512, 512), State(16384, 16)],
    "n": [State(512, 512), State(16384, 16)],
    "g": [State(512, 512), State(16384, 16)],
    "delta": [State(512, 512), State(16384, 16)],
    "d": [State(512, 512), State(16384, 16)],
    "v": [State(512, 512), State(16384, 16)],
    "z": [State(512, 512), State(16384, 16)],
    "weight32": [State(512, 512, dtype="float32"), State(16384, 16, dtype="float32")],
    "lr": [0.01], "t": [1], "wd": [0.0], "r1": [State(1)], "r2": [State(1)],
    # numpy-namespace argument names (nd/np comparison)
    "x1": [T(512, 512), T(16384, 16)],
    "x2": [T(512, 512), T(16384, 1)],
    "a": [T(512, 512), T(16384, 16)],
    "x": [T(512, 512), T(16384, 16)],
}

_SQUARE = [T(512, 512)]
_ELEMWISE = {"lhs": [T(512, 512), T(16384, 16)], "rhs": [T(512, 512), T(16384, 16)]}
_IMG = [T(16, 16, 64, 64)]  # N, C, H, W: 4 MiB
_PDF_NORMAL = {"mu": [State(512)], "sigma": [State(512, low=0.5, high=1.5)]}

_MULTI = ("multi_sgd_update", "multi_sgd_mom_update", "multi_mp_sgd_update",
          "multi_mp_sgd_mom_update", "preloaded_multi_sgd_update", "preloaded_multi_sgd_mom_update",
          "preloaded_multi_mp_sgd_update", "preloaded_multi_mp_sgd_mom_update")


def _multi(op: str) -> list[Tensor]:
    """The ``data`` list of a multi-tensor optimizer over two 512x512 weights."""
    mp = "_mp_" in op
    w = T(512, 512, dtype="float16") if mp else T(512, 512)
    g = State(512, 512, dtype="float16") if mp else State(512, 512)
    per_weight = [w, g]
    if "mom" in op:
        per_weight.append(State(512, 512, dtype="float32"))
    if mp:
        per_weight.append(State(512, 512, dtype="float32"))
    data = per_weight * 2
    if op.startswith("preloaded_"):
        data += [State(2, low=0.01, high=0.02), State(2, low=0.0, high=0.001)]  # lrs, wds
    return data


OPERATOR_INPUTS: dict[str, dict[str, list[Any]]] = {
    **{op: _ELEMWISE for op in ("elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div")},
    # unary functions whose domain excludes [0.1, 0.9)
    "arccosh": {"data": [T(512, 512, low=1.1, high=2.0), T(16384, 16, low=1.1, high=2.0)]},
    # gemm
    "dot": {"lhs": [T(512, 512), T(4096, 64)], "rhs": [T(512, 512), T(64, 512)]},
    "batch_dot": {"lhs": [T(32, 128, 128)], "rhs": [T(32, 128, 128)]},
    "khatri_rao": {"args": [[T(64, 32), T(128, 32)]]},
    # sorting and searching
    "topk": {"data": _SQUARE, "k": [10], "axis": [-1]},
    "argmax": {"data": _SQUARE, "axis": [1]}, "argmin": {"data": _SQUARE, "axis": [1]},
    # indexing
    "slice": {"data": _SQUARE, "begin": [(0, 0)], "end": [(256, 256)]},
    "crop": {"data": _SQUARE, "begin": [(0, 0)], "end": [(256, 256)]},
    "slice_axis": {"data": _SQUARE, "axis": [0], "begin": [0], "end": [256]},
    "slice_like": {"data": _SQUARE, "shape_like": [T(256, 256)]},
    "take": {"a": _SQUARE, "indices": [Idx(4096, high=512)]},
    "batch_take": {"a": _SQUARE, "indices": [Tensor((512,), fill="int", low=0, high=512,
                                                    dtype="int32", grad=False)]},
    "pick": {"data": _SQUARE, "index": [Idx(512, high=512)]},
    "choose_element_0index": {"data": _SQUARE, "index": [Idx(512, high=512)]},
    "fill_element_0index": {"lhs": _SQUARE, "mhs": [State(512)], "rhs": [Idx(512, high=512)]},
    "one_hot": {"indices": [Idx(4096, high=512)], "depth": [512]},
    "gather_nd": {"data": _SQUARE, "indices": [Idx(2, 4096, high=512)]},
    "scatter_nd": {"data": [T(4096)], "indices": [Idx(2, 4096, high=512)], "shape": [(512, 512)]},
    "ravel_multi_index": {"data": [Idx(2, 65536, high=512)], "shape": [(512, 512)]},
    "unravel_index": {"data": [Idx(65536, high=512 * 512)], "shape": [(512, 512)]},
    # rearrange
    "transpose": {"data": _SQUARE, "axes": [(1, 0)]},
    "swapaxes": {"data": _SQUARE, "dim1": [0], "dim2": [1]},
    "SwapAxis": {"data": _SQUARE, "dim1": [0], "dim2": [1]},
    "flip": {"data": _SQUARE, "axis": [0]}, "reverse": {"data": _SQUARE, "axis": [0]},
    "depth_to_space": {"data": _IMG, "block_size": [2]},
    "space_to_depth": {"data": _IMG, "block_size": [2]},
    # shape
    "reshape": {"data": _SQUARE, "shape": [(256, 1024)]},
    "Reshape": {"data": _SQUARE, "shape": [(256, 1024)]},
    "reshape_like": {"lhs": _SQUARE, "rhs": [T(256, 1024)]},
    "squeeze": {"data": [T(512, 1, 512)]},
    # expanding
    "broadcast_axis": {"data": [T(512, 1)], "axis": [(1,)], "size": [(512,)]},
    "broadcast_axes": {"data": [T(512, 1)], "axis": [(1,)], "size": [(512,)]},
    "broadcast_to": {"data": [T(512, 1)], "shape": [(512, 512)]},
    "broadcast_like": {"lhs": [T(512, 1)], "rhs": _SQUARE},
    "expand_dims": {"data": _SQUARE, "axis": [0]},
    "pad": {"data": _IMG, "mode": ["constant"], "pad_width": [(0, 0, 0, 0, 1, 1, 1, 1)]},
    "Pad": {"data": _IMG, "mode": ["constant"], "pad_width": [(0, 0, 0, 0, 1, 1, 1, 1)]},
    "repeat": {"data": _SQUARE, "repeats": [2], "axis": [0]},
    "tile": {"data": _SQUARE, "reps": [(2, 2)]},
    # join and split
    **{op: {"data": [[T(512, 512), T(512, 512)]], "dim": [1]} for op in ("concat", "Concat")},
    "stack": {"data": [[T(512, 512), T(512, 512)]], "axis": [0]},
    "split": {"data": _SQUARE, "num_outputs": [4], "axis": [1]},
    "SliceChannel": {"data": _SQUARE, "num_outputs": [4], "axis": [1]},
    # NN basic
    "FullyConnected": {"data": [T(128, 512)], "weight": [T(256, 512)], "bias": [T(256)],
                       "num_hidden": [256]},
    "Dropout": {"data": _SQUARE, "p": [0.5], "mode": ["always"]},
    "BatchNorm": {"data": _IMG, "gamma": [T(16)], "beta": [T(16)], "moving_mean": [State(16)],
                  "moving_var": [State(16)]},
    "LayerNorm": {"data": _SQUARE, "gamma": [T(512)], "beta": [T(512)]},
    "InstanceNorm": {"data": _IMG, "gamma": [T(16)], "beta": [T(16)]},
    "GroupNorm": {"data": _IMG, "gamma": [T(4)], "beta": [T(4)], "num_groups": [4]},
    "L2Normalization": {"data": _SQUARE},
    "LRN": {"data": _IMG, "nsize": [3]},
    "Embedding": {"data": [Idx(128, 64, high=1000)], "weight": [T(1000, 128)],
                  "input_dim": [1000], "output_dim": [128]},
    "RNN": {"data": [T(32, 16, 64)], "parameters": [T(4 * 64 * (64 + 64 + 2))],
            "state": [T(1, 16, 64)], "state_cell": [T(1, 16, 64)], "state_size": [64],
            "num_layers": [1], "mode": ["lstm"]},
    **{op: {"data": _SQUARE, "label": [State(512, 512)]}
       for op in ("LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput")},
    **{op: {"data": _SQUARE, "label": [Idx(512, high=512)]}
       for op in ("SoftmaxOutput", "Softmax", "SVMOutput")},
    "Correlation": {"data1": [T(4, 16, 32, 32)], "data2": [T(4, 16, 32, 32)]},
    "SpatialTransformer": {"data": _IMG, "loc": [T(16, 6)], "target_shape": [(32, 32)],
                           "transform_type": ["affine"], "sampler_type": ["bilinear"]},
    "GridGenerator": {"data": [T(16, 6)], "transform_type": ["affine"], "target_shape": [(64, 64)]},
    "BilinearSampler": {"data": _IMG, "grid": [T(16, 2, 64, 64, low=-0.9, high=0.9)]},
    "im2col": {"data": _IMG, "kernel": [(3, 3)]},
    "col2im": {"data": [T(16, 16 * 9, 62 * 62)], "output_size": [(64, 64)], "kernel": [(3, 3)]},
    "UpSampling": {"data": [[T(16, 16, 32, 32)]], "scale": [2], "sample_type": ["nearest"]},
    # NN activation
    "Activation": {"data": _SQUARE, "act_type": ["relu"]},
    "LeakyReLU": {"data": _SQUARE, "act_type": ["leaky"]},
    "softmax": {"data": _SQUARE}, "log_softmax": {"data": _SQUARE}, "softmin": {"data": _SQUARE},
    "SoftmaxActivation": {"data": _SQUARE}, "hard_sigmoid": {"data": _SQUARE},
    # pooling, convolution
    "Pooling": {"data": _IMG, "kernel": [(3, 3)], "stride": [(2, 2)], "pool_type": ["max"]},
    "ROIPooling": {"data": _IMG, "rois": [Tensor((4, 5), fill="roi", grad=False)],
                   "pooled_size": [(7, 7)], "spatial_scale": [1.0]},
    "Convolution": {"data": _IMG, "weight": [T(32, 16, 3, 3)], "bias": [T(32)],
                    "kernel": [(3, 3)], "num_filter": [32]},
    "Deconvolution": {"data": _IMG, "weight": [T(16, 32, 3, 3)], "bias": [T(32)],
                      "kernel": [(3, 3)], "num_filter": [32], "no_bias": [False]},
    # loss
    "smooth_l1": {"data": _SQUARE, "scalar": [1.0]},
    "softmax_cross_entropy": {"data": _SQUARE, "label": [Idx(512, high=512)]},
    **{op: {"data": [T(32, 16, 64)], "label": [Tensor((16, 8), fill="int", low=1, high=64,
                                                      grad=False)]}
       for op in ("CTCLoss", "ctc_loss")},
    "MakeLoss": {"data": _SQUARE}, "make_loss": {"data": _SQUARE},
    # linalg (batches of 64x64 matrices)
    **{op: {"A": [T(16, 64, 64)], "B": [T(16, 64, 64)], "C": [T(16, 64, 64)]}
       for op in ("linalg_gemm", "linalg_gemm2")},
    **{op: {"A": [Tensor((16, 64, 64), fill="spd")]}
       for op in ("linalg_potrf", "linalg_inverse", "linalg_det", "linalg_slogdet", "linalg_syevd")},
    **{op: {"A": [Tensor((16, 64, 64), fill="lower")], "B": [T(16, 64, 64)]}
       for op in ("linalg_trmm", "linalg_trsm")},
    **{op: {"A": [Tensor((16, 64, 64), fill="lower")]}
       for op in ("linalg_potri", "linalg_sumlogdiag", "linalg_extractdiag",
                  "linalg_extracttrian")},
    "linalg_syrk": {"A": [T(16, 64, 64)]}, "linalg_gelqf": {"A": [T(16, 64, 128)]},
    "linalg_makediag": {"A": [T(16, 64)]}, "linalg_maketrian": {"A": [T(16, 2080)]},
    # reduction (axis None: the whole array), misc
    "norm": {"data": _SQUARE}, "moments": {"data": _SQUARE, "axes": [(0,)]},
    "where": {"condition": [Tensor((512, 512), fill="int", low=0, high=2, grad=False)],
              "x": _SQUARE, "y": _SQUARE},
    "clip": {"data": _SQUARE, "a_min": [0.2], "a_max": [0.8]},
    **{op: {"data": _SQUARE, "dtype": ["float16"]} for op in ("cast", "Cast", "amp_cast")},
    "amp_multicast": {"data": [[T(512, 512), T(512, 512, dtype="float16")]], "num_outputs": [2]},
    "cast_storage": {"data": _SQUARE, "stype": ["row_sparse"]},
    **{op: {"args": [[T(512, 512), T(512, 512), T(512, 512)]]} for op in ("add_n", "ElementWiseSum")},
    **{op: {"data": [T(64, 32, 128)], "use_sequence_length": [True],
            "sequence_length": [Tensor((32,), fill="int", low=1, high=64, grad=False)]}
       for op in ("SequenceLast", "SequenceMask", "SequenceReverse")},
    "diag": {"data": _SQUARE}, "cumsum": {"a": _SQUARE, "axis": [0]},
    "reset_arrays": {"data": [[State(512, 512), State(512, 512)]], "num_arrays": [2]},
    "IdentityAttachKLSparseReg": {"data": [T(512, 512, low=0.01, high=0.99)]},
    "all_finite": {"data": [State(512, 512)]},
    "multi_all_finite": {"data": [[State(512, 512), State(512, 512)]], "num_arrays": [2]},
    "multi_sum_sq": {"data": [[State(512, 512), State(512, 512)]], "num_arrays": [2]},
    # random sampling with array parameters; the scalar ones use DEFAULTS
    "sample_uniform": {"low": [State(512)], "high": [State(512, low=1.0, high=2.0)], "shape": [(512,)]},
    "sample_normal": {"mu": [State(512)], "sigma": [State(512, low=0.5, high=1.5)], "shape": [(512,)]},
    "sample_gamma": {"alpha": [State(512, low=0.5, high=2.0)], "beta": [State(512, low=0.5, high=2.0)],
                     "shape": [(512,)]},
    "sample_exponential": {"lam": [State(512, low=0.5, high=2.0)], "shape": [(512,)]},
    "sample_poisson": {"lam": [State(512, low=0.5, high=2.0)], "shape": [(512,)]},
    "sample_negative_binomial": {"k": [State(512, low=1.0, high=5.0)], "p": [State(512)],
                                 "shape": [(512,)]},
    "sample_generalized_negative_binomial": {"mu": [State(512, low=1.0, high=2.0)],
                                             "alpha": [State(512)], "shape": [(512,)]},
    "sample_multinomial": {"data": [Tensor((512, 16), fill="simplex", grad=False)], "shape": [(64,)]},
    "random_randint": {"low": [0], "high": [100], "shape": [(512, 512)], "dtype": ["int32"]},
    "random_pdf_uniform": {"sample": [T(512, 512)], "low": [State(512, low=0.0, high=0.05)],
                           "high": [State(512, low=0.95, high=1.0)]},
    "random_pdf_normal": {"sample": [T(512, 512)], **_PDF_NORMAL},
    "random_pdf_gamma": {"sample": [T(512, 512)], "alpha": [State(512, low=0.5, high=2.0)],
                         "beta": [State(512, low=0.5, high=2.0)]},
    "random_pdf_exponential": {"sample": [T(512, 512)], "lam": [State(512, low=0.5, high=2.0)]},
    "random_pdf_poisson": {"sample": [Tensor((512, 512), fill="int", low=0, high=5, grad=False)],
                           "lam": [State(512, low=0.5, high=2.0)]},
    "random_pdf_negative_binomial": {"sample": [Tensor((512, 512), fill="int", low=0, high=5, grad=False)],
                                     "k": [State(512, low=1.0, high=5.0)], "p": [State(512)]},
    "random_pdf_generalized_negative_binomial": {
        "sample": [Tensor((512, 512), fill="int", low=0, high=5, grad=False)],
        "mu": [State(512, low=1.0, high=2.0)], "alpha": [State(512)]},
    "random_pdf_dirichlet": {"sample": [Tensor((512, 16), fill="simplex")],
                             "alpha": [State(512, 16, low=0.5, high=2.0)]},
    "shuffle": {"data": _SQUARE},
    # optimizers with extra states or parameters
    "mp_sgd_update": {"weight": [T(512, 512, dtype="float16")],
                      "grad": [State(512, 512, dtype="float16")], "weight32": [State(512, 512, dtype="float32")]},
    "mp_sgd_mom_update": {"weight": [T(512, 512, dtype="float16")],
                          "grad": [State(512, 512, dtype="float16")], "mom": [State(512, 512, dtype="float32")],
                          "weight32": [State(512, 512, dtype="float32")]},
    "mp_nag_mom_update": {"weight": [T(512, 512, dtype="float16")],
                          "grad": [State(512, 512, dtype="float16")], "mom": [State(512, 512, dtype="float32")],
                          "weight32": [State(512, 512, dtype="float32")]},
    "lamb_update_phase1": {"t": [1], "wd": [0.0]},
    "mp_lamb_update_phase1": {"weight": [T(512, 512, dtype="float16")],
                              "grad": [State(512, 512, dtype="float16")],
                              "mean": [State(512, 512, dtype="float32")],
                              "var": [State(512, 512, dtype="float32")],
                              "weight32": [State(512, 512, dtype="float32")]},
    "mp_lamb_update_phase2": {"weight": [T(512, 512, dtype="float16")],
                              "g": [State(512, 512, dtype="float32")],
                              "r1": [State(1, dtype="float32")], "r2": [State(1, dtype="float32")],
                              "weight32": [State(512, 512, dtype="float32")]},
    # multi-tensor optimizers: two weights, each followed by its gradient and states
    **{op: {"data": [_multi(op)], "lrs": [(0.01, 0.01)], "wds": [(0.0, 0.0)],
            "num_weights": [2]} for op in _MULTI},
    "multi_lars": {"lrs": [State(2)], "weights_sum_sq": [State(2)], "grads_sum_sq": [State(2)],
                   "wds": [State(2)], "eta": [0.001], "eps": [1e-8]},
    "lamb_update_phase2": {"g": [State(512, 512), State(16384, 16)], "r1": [State(1)],
                           "r2": [State(1)], "lr": [0.01]},
}

# Shapes above 2**31 elements (opperf's DEFAULTS_INPUTS_LARGE_TENSOR): an int64-tensor build only.
LARGE_TENSOR: dict[str, list[Any]] = {
    "data": [T(2 ** 16, 2 ** 16), T(2 ** 28, 2 ** 4), T(2 ** 32, 1)],
    "lhs": [T(2 ** 16, 2 ** 16), T(2 ** 28, 2 ** 4), T(2 ** 32, 1)],
    "rhs": [T(2 ** 16, 2 ** 16), T(2 ** 28, 2 ** 4), T(2 ** 32, 1)],
    "weight": [T(2 ** 16, 2 ** 16), T(2 ** 28, 2 ** 4), T(2 ** 32, 1)],
    "x1": [T(2 ** 16, 2 ** 16)], "x2": [T(2 ** 16, 2 ** 16)],
    "a": [T(2 ** 16, 2 ** 16)], "x": [T(2 ** 16, 2 ** 16)],
    "shape": [(2 ** 16, 2 ** 16), (2 ** 28, 2 ** 4), (2 ** 32, 1)],
}


def cases_for(op: str, arg_names: list[str], *,
              large_tensor: bool = False) -> list[dict[str, Any]]:
    """The input cases of ``op`` for the arguments ``arg_names`` (only those with a value)."""
    table: dict[str, list[Any]] = dict(DEFAULTS)
    if large_tensor:
        table.update(LARGE_TENSOR)
    table.update(OPERATOR_INPUTS.get(op, {}))
    chosen = {a: table[a] for a in arg_names if a in table}
    n = max((len(v) for v in chosen.values()), default=1)
    return [{a: (v[i] if len(v) == n else v[0]) for a, v in chosen.items()} for i in range(n)]


def describe(case: Mapping[str, Any]) -> dict[str, Any]:
    """JSON form of one input case: tensors as shapes, tuples as lists."""
    def one(v: Any) -> Any:
        if isinstance(v, Tensor):
            return v.describe()
        if isinstance(v, (list, tuple)):
            return [one(x) for x in v]
        return v
    return {k: one(v) for k, v in case.items()}
