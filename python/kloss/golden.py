# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden-case files in the `kloss-golden/1` schema (the repository's
docs/golden-schema.md; kloss-validate in docs/validation.md): write them, read them,
build cases from a PyTorch call, check cases through these bindings, and
run files through `kloss-validate`.

    import torch, torch.nn.functional as F, kloss.golden as kg
    x = torch.randn(16, 100, dtype=torch.float32); t = torch.randint(0, 100, (16,))
    case = kg.from_torch("cross_entropy", x, t, label_smoothing=0.1, reduction="sum")
    kg.write("mine.h5", [case])
    report = kg.validate("mine.h5")        # kloss-validate mine.h5
    assert report.failed == 0

GoldenFile also writes the repository's committed files (its generators,
tools/golden/gen_<family>.py), with the same conventions: floating
inputs stored as float64 holding values rounded to the case dtype, the
reference computed by torch in float64 from those values, integer inputs
as int64, options as attributes typed as torch types them (ints and
booleans int64, reals float64, strings), default tolerances per dtype.
Reading and writing need h5py; from_torch needs torch; Case.check needs
libkloss_c.
"""
import collections
import dataclasses
import inspect
import json
import os
import shutil
import subprocess
import tempfile
from typing import Dict, Optional

import numpy as np

from . import _errors, _programs
from ._core import _sequence_option, from_bfloat16_bits, run, to_bfloat16_bits
from ._registry import op_info
from .functional import signature, split_arguments

__all__ = ["SCHEMA", "DTYPES", "TOLERANCES", "tolerances", "rounded", "Case", "CheckResult", "GoldenFile",
           "COMPACT_DATASET_BYTES", "write", "read", "from_torch", "validate", "ValidateReport", "find_validate"]

SCHEMA = "kloss-golden/1"
DTYPES = ("float32", "float64", "float16", "bfloat16")
# Default (rtol, atol) per dtype: the repository generators' table (kloss
# computes 16-bit types in float and rounds the result; float32 accumulates
# in float).
TOLERANCES = {"float64": (1e-10, 1e-12), "float32": (2e-5, 1e-6), "float16": (6e-3, 1e-3),
              "bfloat16": (4e-2, 1e-2)}
_RESERVED = ("op", "dtype", "index_dtype", "rtol", "atol")


def tolerances(dtype):
    """The default (rtol, atol) of a case dtype."""
    return TOLERANCES[dtype]


def _numpy(v):
    """A NumPy array of an array, list, number or torch tensor (without
    importing torch); floating tensors as float64."""
    if hasattr(v, "detach") and hasattr(v, "is_floating_point"):
        t = v.detach().cpu()
        if t.is_floating_point():
            t = t.double()
        return t.numpy()
    return np.asarray(v)


def rounded(values, dtype):
    """float64 array of `values` rounded to `dtype` (as torch's
    .to(dtype) rounds: to float32 first for the 16-bit types)."""
    a = np.asarray(_numpy(values), dtype=np.float64)
    if dtype == "float64":
        return a.copy()
    with np.errstate(over="ignore"):
        f = a.astype(np.float32)
    if dtype == "float32":
        return f.astype(np.float64)
    if dtype == "float16":
        with np.errstate(over="ignore"):
            return f.astype(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        return from_bfloat16_bits(to_bfloat16_bits(f)).astype(np.float64)
    raise _errors.InvalidArgument("kloss::golden: dtype '%s' is not one of %s" % (dtype, ", ".join(DTYPES)))


CheckResult = collections.namedtuple("CheckResult", "passed max_abs_err max_rel_err reason")
CheckResult.__doc__ = "Case.check's verdict, as kloss-validate reports a case."


@dataclasses.dataclass
class Case:
    """One golden case: a call of `op` with its inputs (name -> array) and
    options (torch's keywords, `reduction` among them), the expected
    `output` and gradients (`grads`: input name -> array) for the upstream
    gradient `grad_output`. rtol/atol None: the dtype's defaults. A case
    without grads checks the forward only."""
    op: str
    dtype: str
    inputs: Dict[str, np.ndarray]
    output: np.ndarray
    grads: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    grad_output: Optional[np.ndarray] = None
    options: Dict[str, object] = dataclasses.field(default_factory=dict)
    index_dtype: Optional[str] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    name: Optional[str] = None

    def tolerances(self):
        d_rtol, d_atol = tolerances(self.dtype)
        return (d_rtol if self.rtol is None else self.rtol, d_atol if self.atol is None else self.atol)

    def check(self):
        """Runs the case through these bindings (libkloss_c) and compares as
        kloss-validate does: every element within atol + rtol * |expected|,
        NaN only against NaN, an infinity only against itself. Returns a
        CheckResult; never raises for kloss's refusals (they are the
        reason)."""
        rtol, atol = self.tolerances()
        try:
            r = run(self.op, dict(self.inputs), dict(self.options), dtype=self.dtype,
                    index_dtype=self.index_dtype or "int64", grad_output=self.grad_output,
                    backward=bool(self.grads))
        except _errors.Error as e:
            return CheckResult(False, 0.0, 0.0, str(e))
        results = [_compare("output", r.output, self.output, rtol, atol)]
        for name, expected in self.grads.items():
            if name not in r.grads:
                results.append((False, 0.0, 0.0, "grad_%s: the op returned no gradient for '%s'" % (name, name)))
            else:
                results.append(_compare("grad_" + name, r.grads[name], expected, rtol, atol))
        reasons = [c[3] for c in results if not c[0]]
        return CheckResult(not reasons, max(c[1] for c in results), max(c[2] for c in results), "; ".join(reasons))


def _compare(item, got, expected, rtol, atol):
    got = np.asarray(got, dtype=np.float64)
    exp = np.asarray(expected, dtype=np.float64)
    if got.shape != exp.shape:
        return False, 0.0, 0.0, "%s: shape %s, expected %s" % (item, list(got.shape), list(exp.shape))
    g, e = got.reshape(-1), exp.reshape(-1)
    finite = np.isfinite(e) & np.isfinite(g)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - e)
    with np.errstate(invalid="ignore"):
        within = finite & (diff <= atol + rtol * np.abs(e))
    ok = np.where(np.isnan(e), np.isnan(g), np.where(np.isinf(e), g == e, within))
    max_abs = float(diff[finite].max()) if finite.any() else 0.0
    nz = finite & (e != 0)
    max_rel = float((diff[nz] / np.abs(e[nz])).max()) if nz.any() else 0.0
    if ok.all():
        return True, max_abs, max_rel, ""
    bad = np.flatnonzero(~ok)
    i = bad[0]
    where = list(np.unravel_index(i, exp.shape)) if exp.shape else []
    return False, max_abs, max_rel, "%s: %d of %d element(s) out of tolerance; first at %s: got %r, expected %r" % (
        item, bad.size, e.size, [int(k) for k in where], float(g[i]), float(e[i]))


def _option_attr(op, name, value, registry=True):
    """An option as the schema types it: by the registry's type where
    `registry` is set and the op has that option, else by the value's
    Python type."""
    info = None
    if registry:
        try:
            info = op_info(op)
        except _errors.Error:
            pass
    o = info.option(name) if info else None
    joined = _sequence_option(value)  # event_dims=(-2, -1), periodic=(True, False): as the call takes them
    if joined is not None:
        return joined
    if isinstance(value, (str, bytes)):
        return value.decode() if isinstance(value, bytes) else value
    if o is not None and o.type == "real":
        return np.float64(value)
    if isinstance(value, (bool, np.bool_)) or (o is not None and o.type == "bool"):
        return np.int64(int(bool(value)))
    if isinstance(value, (int, np.integer)):
        return np.int64(value)
    if isinstance(value, (float, np.floating)):
        return np.float64(value)
    raise TypeError("kloss::golden: option '%s' of a %s case must be a bool, int, float or str (or a tuple or list "
                    "of ints or of bools), got %s"
                    % (name, op, type(value).__name__))


def _input_kind(op, name, data, registry=True):
    """"index" or "real": by the registry where `registry` is set (an
    input it does not list, or an op it cannot give, is real), else by the
    data's type (integers and booleans are indices)."""
    kind = "either"
    if registry:
        try:
            kind = op_info(op).kind(name) if name in op_info(op).inputs else "real"
        except _errors.Error:
            kind = "real"
    if kind == "either":
        kind = "index" if data.dtype.kind in "iub" else "real"
    return kind


# Datasets of at most this many bytes are stored inside their object header
# by GoldenFile(compact=True).
COMPACT_DATASET_BYTES = 16 * 1024


def _libver_bounds(libver):
    """HDF5's (low, high) format bounds of h5py.File's `libver` argument."""
    import h5py

    def bound(name):
        return getattr(h5py.h5f, "LIBVER_" + {"v108": "V18"}.get(name, name.upper()))
    if isinstance(libver, str):
        return bound(libver), h5py.h5f.LIBVER_LATEST
    return bound(libver[0]), bound(libver[1])


class GoldenFile:
    """A golden file being written: `with GoldenFile(path) as g:
    g.add(case)` or `g.add_case(name, op, dtype, inputs, output, ...)`
    (torch tensors or arrays).

    How values are typed: with `registry` (the default) an input is an
    index (int64) or real (float64, rounded to the case dtype) as the op's
    registry entry says, and an option is typed by the registry's type
    where the op has it; with registry=False both are typed by the values
    alone (integer and boolean inputs int64, floating ones float64 rounded
    to the dtype; options by their Python type), so that the file does not
    depend on whether libkloss_c is found (the repository's generators).

    How the file is laid out (the same datasets and attributes either way):
    `h5py_kwargs` go to h5py.File (e.g. libver="latest": HDF5's newer object
    headers, about a third of the size for hundreds of small cases);
    compact=True stores each dataset of at most COMPACT_DATASET_BYTES
    inside its object header, and every dataset without timestamps;
    track_times=False writes no timestamp on any object (the same bytes on
    every run; the file is then created through HDF5's own call, which
    takes `libver` of h5py_kwargs and nothing else); compact_attrs=n keeps
    up to n attributes in a case group's object header (HDF5 moves more
    than 8 to a heap and an index of their own)."""

    def __init__(self, path, registry=True, compact=False, track_times=True, compact_attrs=None, **h5py_kwargs):
        self.path = path
        self.names = set()
        self.registry = registry
        self.compact = compact
        self.track_times = track_times
        self.compact_attrs = compact_attrs
        self.h5py_kwargs = h5py_kwargs
        if not track_times and set(h5py_kwargs) - {"libver"}:
            raise TypeError("kloss::golden: GoldenFile(track_times=False) takes no h5py.File argument but libver, "
                            "got %s" % ", ".join(sorted(set(h5py_kwargs) - {"libver"})))
        self.count = 0

    def __enter__(self):
        import h5py
        if self.track_times:
            self.f = h5py.File(self.path, "w", **self.h5py_kwargs)
        else:
            fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
            fcpl.set_obj_track_times(False)  # the root group's header
            fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
            if self.h5py_kwargs.get("libver") is not None:
                fapl.set_libver_bounds(*_libver_bounds(self.h5py_kwargs["libver"]))
            self.f = h5py.File(h5py.h5f.create(os.fsencode(self.path), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl))
        self.f.attrs["schema"] = SCHEMA
        self.cases = self._group(self.f, "cases")
        return self

    def __exit__(self, *exc):
        self.f.close()
        return False

    def _group(self, parent, name, case=False):
        import h5py
        attrs = self.compact_attrs if case else None
        if self.track_times and attrs is None:
            return parent.create_group(name)
        gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
        gcpl.set_obj_track_times(self.track_times)
        if attrs is not None:
            gcpl.set_attr_phase_change(attrs, attrs - 2)
        return h5py.Group(h5py.h5g.create(parent.id, name.encode(), gcpl=gcpl))

    def _dataset(self, group, name, data):
        import h5py
        if self.compact:
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            if data.nbytes <= COMPACT_DATASET_BYTES:
                dcpl.set_layout(h5py.h5d.COMPACT)
            return group.create_dataset(name, data=data, dcpl=dcpl, track_times=False)
        if not self.track_times:
            return group.create_dataset(name, data=data, track_times=False)
        return group.create_dataset(name, data=data)

    def add(self, case):
        """Writes a Case (named "<NNN>_<op>_<dtype>" when it has no name)."""
        name = case.name or "%03d_%s_%s" % (self.count, case.op, case.dtype)
        options = dict(case.options)
        reduction = options.pop("reduction", None)
        self.add_case(name, case.op, case.dtype, case.inputs, case.output, grads=case.grads,
                      grad_output=case.grad_output, reduction=reduction, index_dtype=case.index_dtype,
                      options=options, rtol=case.rtol, atol=case.atol)
        return name

    def add_case(self, name, op, dtype, inputs, output, grads=None, grad_output=None, reduction=None,
                 index_dtype=None, options=None, rtol=None, atol=None, extra_attrs=None):
        """Writes case `name`: a call of `op` on `inputs` (name -> tensor or
        array; None: absent) with `options` (torch's keywords but
        `reduction`; None: absent) giving `output`, and with `grad_output`
        the gradients `grads` (input name -> array). rtol/atol None: the
        dtype's defaults; extra_attrs: attributes written as given."""
        if name in self.names:
            raise _errors.InvalidArgument("kloss::golden: duplicate case name '%s' in %s" % (name, self.path))
        if dtype not in DTYPES:
            raise _errors.InvalidArgument("kloss::golden: case '%s': dtype '%s' is not one of %s"
                                          % (name, dtype, ", ".join(DTYPES)))
        self.names.add(name)
        self.count += 1
        g = self._group(self.cases, name, case=True)
        g.attrs["op"] = op
        g.attrs["dtype"] = dtype
        if index_dtype is not None:
            g.attrs["index_dtype"] = index_dtype
        if reduction is not None:
            g.attrs["reduction"] = reduction
        for k, v in (options or {}).items():
            if v is not None:
                g.attrs[k] = _option_attr(op, k, v, self.registry)
        for k, v in (extra_attrs or {}).items():
            g.attrs[k] = v
        d_rtol, d_atol = tolerances(dtype)
        g.attrs["rtol"] = np.float64(d_rtol if rtol is None else rtol)
        g.attrs["atol"] = np.float64(d_atol if atol is None else atol)
        ins = self._group(g, "inputs")
        for k, v in inputs.items():
            if v is None:
                continue
            a = _numpy(v)
            if _input_kind(op, k, a, self.registry) == "index":
                self._dataset(ins, k, a.astype(np.int64))
            else:
                self._dataset(ins, k, rounded(a, dtype))
        if grad_output is not None:
            self._dataset(ins, "grad_output", np.asarray(_numpy(grad_output), dtype=np.float64))
        ex = self._group(g, "expected")
        self._dataset(ex, "output", np.asarray(_numpy(output), dtype=np.float64))
        for k, v in (grads or {}).items():
            if v is not None:
                self._dataset(ex, "grad_" + k, np.asarray(_numpy(v), dtype=np.float64))


def write(path, cases, **h5py_kwargs):
    """Writes `cases` (Case objects) to a new golden file at `path`; returns
    the case names written."""
    with GoldenFile(path, **h5py_kwargs) as g:
        return [g.add(c) for c in cases]


def _attr(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.ndarray) and v.size == 1:
        v = v.reshape(())[()]
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def read(path):
    """The cases of a golden file, in the file's order, as Case objects
    (options hold every attribute that is not op, dtype, index_dtype, rtol
    or atol). Raises kloss.Hdf5Error for a file that is not kloss-golden/1."""
    import h5py
    cases = []
    with h5py.File(path, "r") as f:
        schema = _attr(f.attrs.get("schema", None))
        if schema != SCHEMA:
            raise _errors.Hdf5Error("kloss::golden: %s: attribute '/schema' is %r, not '%s'" % (path, schema, SCHEMA))
        for name, g in f["cases"].items():
            attrs = {k: _attr(v) for k, v in g.attrs.items()}
            inputs = {k: d[()] for k, d in g["inputs"].items() if k != "grad_output"}
            go = g["inputs"]["grad_output"][()] if "grad_output" in g["inputs"] else None
            ex = g["expected"]
            grads = {k[len("grad_"):]: d[()] for k, d in ex.items() if k.startswith("grad_")}
            cases.append(Case(op=attrs["op"], dtype=attrs["dtype"], inputs=inputs, output=ex["output"][()],
                              grads=grads, grad_output=go,
                              options={k: v for k, v in attrs.items() if k not in _RESERVED},
                              index_dtype=attrs.get("index_dtype"), rtol=attrs.get("rtol"), atol=attrs.get("atol"),
                              name=name))
    return cases


# --- from_torch ----------------------------------------------------------------

_TORCH_ONLY_FREE = {"deterministic"}  # kloss extensions that do not change values


def from_torch(op, *args, name=None, dtype=None, grad_output=True, seed=0, rtol=None, atol=None, **kwargs):
    """A Case from a PyTorch call of `op` (a registered op's name, or a
    function such as torch.nn.functional.cross_entropy), with the
    arguments as torch.nn.functional takes them (tensors, arrays or lists;
    options by keyword).

    The case dtype is `dtype`, else the first floating input's. Floating
    inputs are rounded to it; torch computes the reference in float64 from
    the rounded values (as the repository's generators do). grad_output:
    True (default) draws an upstream gradient uniform in [0.5, 1.5) (seeded
    by `seed`, rounded to the dtype) and records the gradients of every
    differentiable input given; a tensor or array gives it; None or False
    makes a forward-only case. rtol/atol default to the dtype's, with atol
    raised to rtol x the largest finite magnitude of the output and
    gradients (sums err relative to their terms' scale). Options that are
    kloss extensions torch cannot compute (z_loss, ctc_grad) are refused;
    cross_entropy's softcap is composed from torch ops;
    fused_linear_cross_entropy is cross_entropy(input @ weight.T + bias,
    target, weight=ce_weight, ...); cross_entropy's and nll_loss's
    sample_weight (kloss's weight per row) is torch's unreduced loss times
    it, reduced as kloss reduces it (the mean over the counted rows'
    sample weight times class weight; over the sample weights' sum for
    class probabilities).
    """
    import torch
    import torch.nn.functional as F

    op_name = op if isinstance(op, str) else op.__name__
    info = op_info(op_name)
    _, given, options = split_arguments(info, signature(info), args, kwargs)

    tensors, kinds = {}, {}
    for n, v in given.items():
        if v is None:
            continue
        t = v if isinstance(v, torch.Tensor) else torch.as_tensor(np.asarray(_numpy(v)))
        kind = info.kind(n)
        if kind == "either":
            kind = "real" if t.is_floating_point() else "index"
        if kind == "index" and t.is_floating_point():
            raise _errors.InvalidArgument("kloss::golden: input '%s' of %s holds indices: it must be an integer "
                                          "tensor, got %s" % (n, op_name, t.dtype))
        tensors[n], kinds[n] = t.detach().cpu(), kind
    if dtype is None:
        floating = [t for n, t in tensors.items() if kinds[n] == "real" and t.is_floating_point()]
        dtype = str(floating[0].dtype).replace("torch.", "") if floating else "float64"
    if dtype not in DTYPES:
        raise _errors.InvalidArgument("kloss::golden: dtype '%s' is not one of %s" % (dtype, ", ".join(DTYPES)))
    index = [t for n, t in tensors.items() if kinds[n] == "index"]
    index_dtype = None
    if index:
        index_dtype = "int32" if all(t.dtype == torch.int32 for t in index) else "int64"

    # The values the case stores, and float64 leaves for the reference.
    stored = {}
    leaves = {}
    for n, t in tensors.items():
        if kinds[n] == "index":
            stored[n] = t.to(torch.int64).numpy()
            leaves[n] = t.to(torch.int64)
        else:
            stored[n] = rounded(t, dtype)
            diff = n in info.differentiable and grad_output is not None and grad_output is not False
            leaves[n] = torch.from_numpy(stored[n].copy()).requires_grad_(diff)

    case_options = {}
    torch_options = {}
    fn_name = "cross_entropy" if op_name == "fused_linear_cross_entropy" else op_name
    torch_params = inspect.signature(getattr(F, fn_name)).parameters
    softcap = 0.0
    for k, v in options.items():
        if v is None:
            continue
        default = info.option(k).default
        if k in torch_params:
            torch_options[k] = v
            case_options[k] = v
        elif k == "softcap" and fn_name == "cross_entropy":
            softcap = float(v)
            if softcap:
                case_options[k] = v
        elif k in _TORCH_ONLY_FREE:
            case_options[k] = v
        elif v != default:
            raise _errors.NotSupported("kloss::golden: from_torch: option '%s' of %s is a kloss extension torch "
                                       "cannot compute; build that Case's expected values yourself" % (k, op_name))

    out = _torch_call(F, op_name, leaves, torch_options, softcap)
    case_grads = {}
    go = None
    diff_leaves = [n for n in info.differentiable if n in leaves and leaves[n].requires_grad]
    if grad_output is not None and grad_output is not False and diff_leaves and out.requires_grad:
        if grad_output is True:
            gen = torch.Generator().manual_seed(seed)
            go = 0.5 + torch.rand(out.shape, generator=gen, dtype=torch.float64)
        else:
            go = torch.as_tensor(np.asarray(_numpy(grad_output), dtype=np.float64)).reshape(out.shape)
        go = torch.from_numpy(rounded(go, dtype))
        gs = torch.autograd.grad(out, [leaves[n] for n in diff_leaves], go, allow_unused=True)
        for n, g in zip(diff_leaves, gs):
            case_grads[n] = (torch.zeros_like(leaves[n]) if g is None else g).detach().numpy()
    output = out.detach().to(torch.float64).numpy()

    d_rtol, d_atol = tolerances(dtype)
    rtol = d_rtol if rtol is None else rtol
    if atol is None:
        mags = [np.abs(a[np.isfinite(a)]) for a in [output] + list(case_grads.values())]
        big = max([float(m.max()) for m in mags if m.size] + [1.0])
        atol = max(d_atol, rtol * big)
    return Case(op=op_name, dtype=dtype, inputs=stored, output=output, grads=case_grads,
                grad_output=None if go is None else go.numpy(), options=case_options, index_dtype=index_dtype,
                rtol=float(rtol), atol=float(atol), name=name)


def _torch_call(F, op, leaves, options, softcap):
    s = leaves.get("sample_weight") if op in ("cross_entropy", "nll_loss") else None
    if s is not None:
        # kloss's sample_weight: torch's unreduced rows times it; the mean
        # over sum(s * weight[target]) of the counted rows (class indices),
        # over sum(s) (class probabilities)
        import torch
        reduction = options.get("reduction", "mean")
        rest = {k: v for k, v in leaves.items() if k != "sample_weight"}
        terms = _torch_call(F, op, rest, dict(options, reduction="none"), softcap) * s
        if reduction == "none":
            return terms
        if reduction == "sum":
            return terms.sum()
        target = leaves["target"]
        if target.is_floating_point():
            return terms.sum() / s.sum()
        keep = target != options.get("ignore_index", -100)
        w = leaves.get("weight")
        wt = torch.ones_like(s) if w is None else w[torch.where(keep, target, torch.zeros_like(target))]
        return terms.sum() / torch.where(keep, s * wt, torch.zeros_like(s)).sum()
    if op in ("cross_entropy", "fused_linear_cross_entropy"):
        if op == "fused_linear_cross_entropy":
            logits = F.linear(leaves["input"], leaves["weight"], leaves.get("bias"))
            args = {"input": logits, "target": leaves["target"], "weight": leaves.get("ce_weight")}
        else:
            args = {"input": leaves["input"], "target": leaves["target"], "weight": leaves.get("weight")}
        if softcap:
            args["input"] = softcap * (args["input"] / softcap).tanh()
        return F.cross_entropy(**args, **options)
    return getattr(F, op)(**leaves, **options)


# --- kloss-validate ----------------------------------------------------------------

ValidateReport = collections.namedtuple("ValidateReport", "passed failed returncode cases output")
ValidateReport.__doc__ = """validate's result: counts of passed and failed cases, the exit
status, one dict per case (name, op, dtype, passed, max_abs_err,
max_rel_err, reason; kloss-validate's --json) and the printed report."""


def find_validate():
    """The kloss-validate program: $KLOSS_VALIDATE, else beside the library
    of $KLOSS_LIBRARY (a build tree's src/) or in its ../bin, else the one
    the package ships (kloss/bin), else $KLOSS_ROOT/bin, else on PATH.
    Raises FileNotFoundError."""
    env = os.environ.get("KLOSS_VALIDATE")
    if env:
        if os.path.isfile(env):
            return env
        raise FileNotFoundError("kloss-validate: $KLOSS_VALIDATE is %s, which does not exist" % env)
    dirs = []
    lib = os.environ.get("KLOSS_LIBRARY")
    if lib:
        d = lib if os.path.isdir(lib) else os.path.dirname(os.path.abspath(lib))
        dirs += [d, os.path.join(d, "..", "bin")]
    shipped = _programs.bundled("kloss-validate")
    if shipped:
        dirs.append(os.path.dirname(shipped))
    if os.environ.get("KLOSS_ROOT"):
        dirs.append(os.path.join(os.environ["KLOSS_ROOT"], "bin"))
    for d in dirs:
        p = os.path.join(d, "kloss-validate")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.normpath(p)
    p = shutil.which("kloss-validate")
    if p:
        return p
    raise FileNotFoundError("kloss-validate not found: set KLOSS_VALIDATE to the program (build/release/src/"
                            "kloss-validate in a build tree, <prefix>/bin/kloss-validate when installed)")


def validate(paths, executable=None, filter=None, extra_args=()):
    """Runs golden file(s) `paths` through kloss-validate (`executable`,
    default find_validate()) and returns a ValidateReport. Does not raise
    for failing cases: look at .failed (and .returncode: 0 iff all passed,
    2 for a usage error)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    exe = executable or find_validate()
    fd, json_path = tempfile.mkstemp(suffix=".json", prefix="kloss-validate-")
    os.close(fd)
    try:
        cmd = [exe, "--json", json_path] + (["--filter", filter] if filter else []) + list(extra_args) + \
            [os.fspath(p) for p in paths]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        cases, passed, failed = [], 0, 0
        try:
            with open(json_path) as f:
                report = json.load(f)
            for file in report.get("files", []):
                for c in file.get("cases", []):
                    cases.append(dict(c, path=file.get("path")))
                if file.get("error"):
                    cases.append({"path": file.get("path"), "name": None, "passed": False,
                                  "reason": file["error"]})
            passed, failed = report.get("passed", 0), report.get("failed", 0)
        except (OSError, ValueError):
            failed = max(1, failed)
        return ValidateReport(passed, failed, proc.returncode, cases, proc.stdout)
    finally:
        os.unlink(json_path)
