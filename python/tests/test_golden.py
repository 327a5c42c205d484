# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden files: written by kloss.golden, read back, run through
kloss-validate (a failing case must fail there too); the repository's
committed files read and checked through these bindings. No PyTorch: the
expected values come from the NumPy references (test_torch builds cases
with from_torch)."""
import dataclasses
import glob
import os

import numpy as np
import pytest

import kloss
import reference
from cases import cases

h5py = pytest.importorskip("h5py", reason="h5py is not installed: kloss.golden's file I/O needs it")
import kloss.golden as kg  # noqa: E402


def _numpy_case(c):
    """A float64 Case of call c from the NumPy reference: output and central
    differences of it (ctc_loss's plain partial derivative, ctc_grad)."""
    info = kloss.op_info(c.op)
    out = np.asarray(reference.forward(c.op, c.inputs, c.options), dtype=np.float64)
    go = np.random.default_rng(11).uniform(0.5, 1.5, out.shape)
    # (cross_entropy's target is differentiable where it holds probabilities)
    diff = [n for n in info.differentiable if n in c.inputs and np.asarray(c.inputs[n]).dtype.kind == "f"]
    grads = reference.numeric_grads(c.op, c.inputs, c.options, go, diff)
    options = dict(c.options)
    if c.op == "ctc_loss":
        options["ctc_grad"] = True
    return kg.Case(op=c.op, dtype="float64", inputs=dict(c.inputs), output=out, grads=grads, grad_output=go,
                   options=options, rtol=1e-6, atol=1e-7, name=c.id)


def test_write_read_round_trip(tmp_path):
    written = [_numpy_case(c) for c in cases()]
    path = str(tmp_path / "mine.h5")
    names = kg.write(path, written)
    assert names == [c.name for c in written]
    back = {c.name: c for c in kg.read(path)}
    assert list(back) == sorted(names)
    for c in written:
        r = back[c.name]
        assert (r.op, r.dtype, r.rtol, r.atol) == (c.op, c.dtype, c.rtol, c.atol)
        assert set(r.inputs) == set(c.inputs)
        for k, v in c.inputs.items():
            assert r.inputs[k].dtype == (np.int64 if np.asarray(v).dtype.kind in "iu" else np.float64)
            np.testing.assert_array_equal(r.inputs[k], v)
        np.testing.assert_array_equal(r.output, c.output)
        np.testing.assert_array_equal(r.grad_output, c.grad_output)
        assert set(r.grads) == set(c.grads)
        for k in c.grads:
            np.testing.assert_array_equal(r.grads[k], c.grads[k])
        for k, v in c.options.items():
            assert r.options[k] == v, (c.name, k)
    with h5py.File(path, "r") as f:
        assert f.attrs["schema"] == kg.SCHEMA
        g = f["cases"]["triplet_margin_loss-p1_swap"]
        assert g.attrs["p"].dtype == np.float64 and g.attrs["swap"].dtype == np.int64  # typed as torch types them
        assert f["cases"]["multi_margin_loss-p2_weight"].attrs["p"].dtype == np.int64


def test_every_op_round_trips_through_kloss_validate(tmp_path, kloss_validate):
    path = str(tmp_path / "all_ops.h5")
    written = [_numpy_case(c) for c in cases()]
    kg.write(path, written)
    report = kg.validate(path, executable=kloss_validate)
    assert report.failed == 0 and report.returncode == 0, report.output
    assert report.passed == len(written)
    assert {c["op"] for c in report.cases} == set(kloss.ops())
    assert report.output.rstrip().splitlines()[-1] == "%d passed, 0 failed" % len(written)
    # and through these bindings, as kloss-validate compares
    for c in kg.read(path):
        assert c.check().passed, c.name


def test_a_wrong_expected_value_fails_in_kloss_validate_and_in_check(tmp_path, kloss_validate):
    good = [_numpy_case(c) for c in cases() if c.op in ("cross_entropy", "embedding_bag")]
    bad = good[0]
    bad_output = bad.output + 1e-3
    wrong_grad = dict(good[1].grads)
    name = next(iter(wrong_grad))
    wrong_grad[name] = wrong_grad[name] * 1.01 + 1e-3
    cases_ = [dataclasses.replace(bad, output=bad_output),
              dataclasses.replace(good[1], grads=wrong_grad)] + good[2:]
    path = str(tmp_path / "broken.h5")
    kg.write(path, cases_)
    report = kg.validate(path, executable=kloss_validate)
    assert report.returncode == 1 and report.failed == 2 and report.passed == len(good) - 2, report.output
    failed = {c["name"]: c["reason"] for c in report.cases if not c["passed"]}
    assert "output" in failed[good[0].name]
    assert "grad_" + name in failed[good[1].name]
    checks = [c.check() for c in kg.read(path)]
    assert sum(not r.passed for r in checks) == 2


def test_narrow_dtype_cases_round_inputs_on_write(tmp_path, kloss_validate):
    rng = np.random.default_rng(4)
    x, t = rng.standard_normal((6, 7)), rng.integers(0, 7, 6)
    written = []
    for dtype in kg.DTYPES:
        xr = kg.rounded(x, dtype)
        out = reference.forward("cross_entropy", {"input": xr, "target": t}, {})
        written.append(kg.Case(op="cross_entropy", dtype=dtype, inputs={"input": x, "target": t.astype(np.int32)},
                               output=out, index_dtype="int32", name="ce_" + dtype))
    path = str(tmp_path / "dtypes.h5")
    kg.write(path, written)
    for c in kg.read(path):
        np.testing.assert_array_equal(c.inputs["input"], kg.rounded(x, c.dtype))
        assert c.index_dtype == "int32" and not c.grads
    report = kg.validate(path, executable=kloss_validate)
    assert report.failed == 0 and report.passed == 4, report.output


def test_rounded_matches_the_dtypes():
    x = np.array([1 / 3, 1e5, -2.5e-8, 70000.0])
    assert kg.rounded(x, "float64").tolist() == x.tolist()
    assert kg.rounded(x, "float32").tolist() == x.astype(np.float32).astype(np.float64).tolist()
    assert kg.rounded(x, "float16")[3] == np.inf  # beyond float16
    assert kg.rounded(x, "bfloat16")[0] == 0.333984375  # 8 significant bits
    with pytest.raises(kloss.InvalidArgument):
        kg.rounded(x, "int8")


def test_duplicate_names_and_bad_files_are_refused(tmp_path):
    c = _numpy_case(cases()[0])
    with pytest.raises(kloss.InvalidArgument, match="duplicate case name"):
        kg.write(str(tmp_path / "dup.h5"), [c, c])
    other = str(tmp_path / "other.h5")
    with h5py.File(other, "w") as f:
        f.attrs["schema"] = "something/2"
    with pytest.raises(kloss.Hdf5Error, match="schema"):
        kg.read(other)


def test_check_reports_klosss_refusal_as_the_reason():
    c = _numpy_case(next(c for c in cases() if c.id == "mse_loss-mean"))
    c.options["reduction"] = "avg"
    r = c.check()
    assert not r.passed and "kloss::mse_loss: option 'reduction'" in r.reason


def test_committed_golden_files_pass_through_the_bindings(golden_dir):
    """Every committed case (PyTorch's values, every op, dtype, option and
    edge case of the repository's generators) through the C API from
    Python, forward and backward."""
    files = sorted(glob.glob(os.path.join(golden_dir, "*.h5")))
    assert files
    ops, total, failures = set(), 0, []
    for path in files:
        for c in kg.read(path):
            total += 1
            ops.add(c.op)
            r = c.check()
            if not r.passed:
                failures.append("%s/%s: %s" % (os.path.basename(path), c.name, r.reason))
    assert not failures, "\n".join(failures[:20])
    assert ops == set(kloss.ops())
    assert total > 1000


def test_find_validate(monkeypatch, kloss_validate, tmp_path):
    monkeypatch.setenv("KLOSS_VALIDATE", kloss_validate)
    assert kg.find_validate() == kloss_validate
    monkeypatch.setenv("KLOSS_VALIDATE", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="KLOSS_VALIDATE"):
        kg.find_validate()
    monkeypatch.delenv("KLOSS_VALIDATE")
    monkeypatch.setenv("KLOSS_LIBRARY", os.path.join(os.path.dirname(kloss_validate), "libkloss_c.so"))
    monkeypatch.setenv("PATH", "")
    assert os.path.samefile(kg.find_validate(), kloss_validate)


def test_tuple_options_are_written_as_the_call_takes_them(tmp_path, kloss_validate):
    # energy_score's event_dims=(-2, -1): a string attribute "-2,-1", as the
    # registry's option is typed and kloss-validate reads it
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(3, 4, 2, 3)), rng.normal(size=(3, 2, 3))
    opts = {"member_dim": 1, "event_dims": (-2, -1), "estimator": "fair"}
    out = np.asarray(reference.forward("energy_score", {"input": x, "target": y}, opts), dtype=np.float64)
    case = kg.Case(op="energy_score", dtype="float64", inputs={"input": x, "target": y}, output=out, options=opts,
                   rtol=1e-10, atol=1e-12, name="event_dims_tuple")
    path = str(tmp_path / "tuple.h5")
    kg.write(path, [case])
    with h5py.File(path, "r") as f:
        assert f["cases"]["event_dims_tuple"].attrs["event_dims"] in ("-2,-1", b"-2,-1")
    report = kg.validate(path, executable=kloss_validate)
    assert report.failed == 0 and report.passed == 1, report.output
