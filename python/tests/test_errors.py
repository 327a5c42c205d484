# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""kloss's refusals reach Python as kloss.Error subclasses carrying kloss's
own message (kloss_last_error()) and the C API's status."""
import concurrent.futures
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import kloss
from kloss._errors import error_for_status

X = np.random.default_rng(5).standard_normal((4, 5))
T = np.array([0, 4, 1, 2])


def test_invalid_option_value_is_invalid_argument_with_klosss_message():
    with pytest.raises(kloss.InvalidArgument) as e:
        kloss.mse_loss(X, X, reduction="avg")
    assert str(e.value).startswith("kloss::mse_loss: option 'reduction'")
    assert "avg" in str(e.value)
    assert e.value.status == 1 and e.value.status_name == "KLOSS_ERROR_INVALID_ARGUMENT"
    assert isinstance(e.value, kloss.Error) and isinstance(e.value, ValueError)


def test_option_of_the_wrong_type():
    with pytest.raises(kloss.InvalidArgument, match="kloss::mse_loss: option 'reduction' must be a string"):
        kloss.mse_loss(X, X, reduction=3)
    with pytest.raises(kloss.InvalidArgument, match="kloss::cross_entropy: option 'ignore_index' must be an integer"):
        kloss.cross_entropy(X, T, ignore_index=1.5)
    with pytest.raises(TypeError, match="option 'margin'"):
        kloss.hinge_embedding_loss(X, np.sign(X), margin=[1.0])


def test_shape_mismatch_is_dimension_mismatch():
    with pytest.raises(kloss.DimensionMismatch, match=r"^kloss::mse_loss: ") as e:
        kloss.mse_loss(X, X.T)
    assert e.value.status == 2
    with pytest.raises(kloss.DimensionMismatch, match="kloss::cross_entropy"):
        kloss.cross_entropy(X, T[:3])


def test_a_sample_weight_of_another_shape_than_the_rows_is_dimension_mismatch():
    # kloss's sample_weight: one weight per row, the rows' shape (the target's
    # for class indices, input's without the class axis for probabilities,
    # a scalar for an unbatched [C] input)
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::cross_entropy.*'sample_weight'") as e:
        kloss.cross_entropy(X, T, sample_weight=np.ones(3))
    assert e.value.status == 2
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::cross_entropy.*'sample_weight'"):
        kloss.cross_entropy(X, T, sample_weight=np.ones((4, 1)), reduction="none")
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::cross_entropy.*'sample_weight'"):
        kloss.cross_entropy_backward(None, X, T, sample_weight=np.ones(5))
    p = np.full((4, 5), 0.2)
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::cross_entropy.*'sample_weight'"):
        kloss.cross_entropy(X, p, sample_weight=np.ones((4, 5)))  # probabilities: one per row, not per class
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::cross_entropy.*'sample_weight'"):
        kloss.cross_entropy_backward(None, X, p, sample_weight=np.ones(5), reduction="sum")
    x3 = np.zeros((2, 5, 3))
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::cross_entropy.*'sample_weight'"):
        kloss.cross_entropy(x3, np.zeros((2, 3), dtype=np.int64), sample_weight=np.ones(2))  # K-dim: [2, 3]
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::cross_entropy.*'sample_weight'"):
        kloss.cross_entropy(X[0], np.array(1), sample_weight=np.ones(1))  # unbatched: a scalar
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::nll_loss.*'sample_weight'"):
        kloss.nll_loss(X, T, sample_weight=np.ones((2, 2)))
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::nll_loss.*'sample_weight'"):
        kloss.nll_loss_backward(None, X, T, sample_weight=np.ones(6), reduction="sum")
    # the rows' shape is taken
    assert kloss.cross_entropy(x3, np.zeros((2, 3), dtype=np.int64), sample_weight=np.ones((2, 3))) == \
        pytest.approx(np.log(5))


def test_target_out_of_range_is_index_out_of_range():
    with pytest.raises(kloss.IndexOutOfRange, match=r"kloss::cross_entropy: argument 'target'.*outside \[0, 5\)") as e:
        kloss.cross_entropy(X, np.array([0, 9, 1, 2]))
    assert isinstance(e.value, IndexError) and e.value.status == 3
    with pytest.raises(kloss.IndexOutOfRange, match="kloss::embedding"):
        kloss.embedding_backward(np.ones((2, 5)), np.array([0, 4]), X)


def test_values_the_op_refuses():
    with pytest.raises(kloss.InvalidArgument, match="kloss::binary_cross_entropy"):
        kloss.binary_cross_entropy(np.array([1.5]), np.array([1.0]))
    with pytest.raises(kloss.InvalidArgument, match="kloss::cross_entropy.*label_smoothing"):
        kloss.cross_entropy(X, T, label_smoothing=2.0)


def test_unknown_input_option_and_op_are_not_supported():
    with pytest.raises(kloss.NotSupported, match="kloss::mse_loss: input 'bogus' is not an argument") as e:
        kloss.run("mse_loss", {"input": X, "target": X, "bogus": X})
    assert e.value.status == 4 and isinstance(e.value, NotImplementedError)
    with pytest.raises(kloss.NotSupported, match="kloss::mse_loss: option 'bogus' is not an option of this op"):
        kloss.run("mse_loss", {"input": X, "target": X}, {"bogus": 1})
    with pytest.raises(kloss.NotSupported, match="no such op"):
        kloss.run("softmax", {"input": X})


def test_python_side_checks_name_the_op_and_argument():
    with pytest.raises(kloss.InvalidArgument, match="kloss::nll_loss: input 'target' holds indices"):
        kloss.nll_loss(X, T.astype(float))
    with pytest.raises(kloss.InvalidArgument, match="kloss::mse_loss: input 'input' has dtype complex128"):
        kloss.mse_loss(X + 1j, X)
    with pytest.raises(kloss.InvalidArgument, match="dtype int64 is not a floating dtype"):
        kloss.mse_loss(X, X, dtype="int64")
    with pytest.raises(kloss.InvalidArgument, match="outside int32"):
        kloss.nll_loss(X, np.array([0, 2**40, 1, 2]), index_dtype="int32")


def test_comm_reaches_the_c_api():
    # Python's process has not initialised MPI: the sharded call is refused
    # by kloss (MpiError), or by a library built without MPI (NotSupported);
    # either way it is kloss that answers, naming the op.
    x = np.zeros(3)
    with pytest.raises((kloss.MpiError, kloss.NotSupported), match=r"kloss::mse_loss|mpi::Communicator|MPI"):
        kloss.mse_loss(x, x, comm=0)
    with pytest.raises(TypeError, match="comm must be an mpi4py communicator"):
        kloss.mse_loss(x, x, comm="world")


def test_reproducible_needs_comm():
    # the reproducible mode is one of the sharded call: without comm= it is
    # refused in Python (a ValueError naming comm), before any call of kloss's
    x = np.zeros(3)
    for call in (lambda: kloss.mse_loss(x, x, reproducible=True),
                 lambda: kloss.mse_loss_backward(None, x, x, reproducible=True),
                 lambda: kloss.cross_entropy(X, T, reproducible=True),
                 lambda: kloss.run("mse_loss", {"input": x, "target": x}, reproducible=True)):
        with pytest.raises(ValueError, match=r"reproducible=True needs comm="):
            call()
    # every generated function takes it, keyword-only, off by default
    for fn in (kloss.mse_loss, kloss.mse_loss_backward, kloss.cross_entropy, kloss.gaussian_nll_loss_backward):
        p = inspect.signature(fn).parameters["reproducible"]
        assert p.kind == inspect.Parameter.KEYWORD_ONLY and p.default is False, fn.__name__
    assert inspect.signature(kloss.run).parameters["reproducible"].default is False
    # off, without comm: the ordinary call
    assert kloss.mse_loss(x, x + 1, reproducible=False) == 1.0
    # with comm it reaches the C API, as comm alone does (test_comm_reaches_the_c_api)
    with pytest.raises((kloss.MpiError, kloss.NotSupported), match=r"kloss::mse_loss|mpi::Communicator|MPI"):
        kloss.mse_loss(x, x, comm=0, reproducible=True)


def test_a_weight_or_mask_that_does_not_broadcast_is_dimension_mismatch():
    # kloss's weights and masks broadcast to the output's shape without growing it
    x = np.zeros((3, 5))
    for op in ("mse_loss", "soft_margin_loss", "quantile_loss", "kl_div", "poisson_nll_loss"):
        fn = getattr(kloss, op)
        with pytest.raises(kloss.DimensionMismatch, match=r"kloss::%s: .*'mask'" % op) as e:
            fn(x, x, mask=np.ones((3, 2)))  # does not broadcast
        assert isinstance(e.value, kloss.Error) and e.value.status == 2
        with pytest.raises(kloss.DimensionMismatch, match=r"kloss::%s: .*'mask'" % op):
            fn(x, x, mask=np.ones((2, 3, 5)))  # would grow the output
        with pytest.raises(kloss.DimensionMismatch, match=r"kloss::%s.*'mask'" % op):
            getattr(kloss, op + "_backward")(None, x, x, mask=np.ones(4))
        with pytest.raises(kloss.DimensionMismatch, match=r"kloss::%s: .*'weight'" % op):
            fn(x, x, weight=np.ones((3, 2)), mask_nonfinite=True)
    var = np.ones((3, 5))
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::gaussian_nll_loss: .*'mask'"):
        kloss.gaussian_nll_loss(x, x, var, mask=np.ones((5, 1)))
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::gaussian_nll_loss.*'weight'"):
        kloss.gaussian_nll_loss_backward(None, x, x, var, weight=np.ones(3))


def test_kl_div_batchmean_with_a_weight_or_a_mask_is_refused():
    # batchmean is torch's without kloss's weights and masks; with any of
    # them the mean is over the counted weights ("mean") or there is "sum"
    x, y = np.log(np.full((3, 4), 0.25)), np.full((3, 4), 0.25)
    with pytest.raises(kloss.InvalidArgument, match=r"kloss::kl_div: batchmean with a weight or a mask") as e:
        kloss.kl_div(x, y, weight=np.ones(4), reduction="batchmean")
    assert e.value.status == 1
    with pytest.raises(kloss.InvalidArgument, match="batchmean with a weight or a mask"):
        kloss.kl_div(x, y, mask=np.ones((3, 1)), reduction="batchmean")
    with pytest.raises(kloss.InvalidArgument, match="batchmean with a weight or a mask"):
        kloss.kl_div(x, y, mask_nonfinite=True, reduction="batchmean")
    with pytest.raises(kloss.InvalidArgument, match="batchmean with a weight or a mask"):
        kloss.kl_div_backward(None, x, y, weight=np.ones(4), reduction="batchmean")
    assert kloss.kl_div(x, y, reduction="batchmean") == pytest.approx(0.0, abs=1e-15)
    np.testing.assert_allclose(kloss.kl_div(x, y, weight=np.ones(4), reduction="sum"), 0.0, atol=1e-15)


def test_a_crps_weight_or_mask_that_does_not_broadcast_is_dimension_mismatch():
    # crps_ensemble's weights and masks are per point (target's shape), not per
    # member; crps_gaussian's per element of the broadcast of input, target and std
    x, y = np.zeros((3, 4, 5)), np.zeros((3, 5))
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::crps_ensemble: .*'weight'") as e:
        kloss.crps_ensemble(x, y, weight=np.ones((2, 3, 5)), member_dim=1)  # would grow the points
    assert isinstance(e.value, kloss.Error) and e.value.status == 2
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::crps_ensemble: .*'weight'"):
        kloss.crps_ensemble(x, y, weight=np.ones((3, 4, 5)), member_dim=1)  # input's shape: one per member
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::crps_ensemble: .*'mask'"):
        kloss.crps_ensemble(x, y, mask=np.ones((3, 4)), member_dim=1, mask_nonfinite=True)
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::crps_ensemble.*'mask'"):
        kloss.crps_ensemble_backward(None, x, y, mask=np.ones((3, 1, 5)), member_dim=1)
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::crps_ensemble.*'weight'"):
        kloss.crps_ensemble_backward(None, x, y, weight=np.ones(4), member_dim=1, reduction="sum")
    x, std = np.zeros((3, 5)), np.ones(5)
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::crps_gaussian: .*'mask'"):
        kloss.crps_gaussian(x, x, std, mask=np.ones((2, 3, 5)))  # would grow the output
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::crps_gaussian: .*'weight'"):
        kloss.crps_gaussian(x, x[:, :1], std, weight=np.ones((3, 2)), mask_nonfinite=True)
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::crps_gaussian.*'weight'"):
        kloss.crps_gaussian_backward(None, x, x, std, weight=np.ones(3))


def test_a_multivariate_weight_or_mask_that_does_not_broadcast_is_dimension_mismatch():
    # energy_score's and variogram_score's weights and masks are per point (the
    # target's shape without the event axes), not per event element;
    # variogram_score's weight per point is point_weight (weight: the pair weights)
    x, y = np.zeros((3, 4, 5)), np.zeros((3, 5))
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::energy_score: .*'weight'") as e:
        kloss.energy_score(x, y, weight=np.ones(5), member_dim=1)  # one per event element
    assert isinstance(e.value, kloss.Error) and e.value.status == 2
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::energy_score: .*'mask'"):
        kloss.energy_score(x, y, mask=np.ones((2, 3)), member_dim=1, mask_nonfinite=True)  # would grow the points
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::energy_score.*'weight'"):
        kloss.energy_score_backward(None, x, y, weight=np.ones((3, 5)), member_dim=1)
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::variogram_score: .*'point_weight'"):
        kloss.variogram_score(x, y, point_weight=np.ones(5), member_dim=1)
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::variogram_score.*'mask'"):
        kloss.variogram_score_backward(None, x, y, weight=np.ones((5, 5)), mask=np.ones(4), member_dim=1)


def test_a_call_after_an_error_succeeds():
    with pytest.raises(kloss.Error):
        kloss.mse_loss(X, X, reduction="avg")
    assert kloss.mse_loss(X, X) == 0.0


def test_errors_from_several_threads_keep_their_own_messages():
    def call(i):
        try:
            kloss.mse_loss(X, X, reduction="bad%d" % i)
        except kloss.InvalidArgument as e:
            return "bad%d" % i in str(e)
        return False
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert all(pool.map(call, range(32)))


def test_status_mapping():
    assert type(error_for_status(3, "m")) is kloss.IndexOutOfRange
    assert type(error_for_status(9, "m")) is kloss.InvalidState
    assert type(error_for_status(11, "m")) is kloss.InternalError
    e = error_for_status(99, "odd")
    assert type(e) is kloss.Error and e.status == 99 and str(e) == "odd"


def test_a_missing_library_is_library_not_found():
    # import kloss (and its submodules) needs no library; the op table comes
    # from the library, so the ops, the op functions and kloss.run raise
    # LibraryNotFound (an ImportError); private names stay AttributeErrors
    code = ("import kloss, kloss.functional, kloss.golden, numpy as np\n"
            "assert not hasattr(kloss, '_nothing') and 'run' in dir(kloss) and 'mse_loss' not in dir(kloss)\n"
            "for call in (kloss.ops, lambda: kloss.op_info('mse_loss'), lambda: kloss.mse_loss,\n"
            "             lambda: kloss.functional.mse_loss_backward, lambda: kloss.__all__,\n"
            "             lambda: kloss.run('mse_loss', {'input': np.ones(2), 'target': np.ones(2)})):\n"
            "    try:\n"
            "        call()\n"
            "        raise SystemExit('no error')\n"
            "    except kloss.LibraryNotFound as e:\n"
            "        assert isinstance(e, ImportError) and 'KLOSS_LIBRARY' in str(e), str(e)\n"
            "try:\n"
            "    from kloss import cross_entropy\n"
            "except kloss.LibraryNotFound as e:\n"
            "    assert 'kloss.cross_entropy' in str(e), str(e)\n"
            "    print('refused:', e)\n")
    env = dict(os.environ, KLOSS_LIBRARY="/nonexistent/libkloss_c.so")
    r = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    assert r.returncode == 0 and "refused:" in r.stdout and "/nonexistent/libkloss_c.so" in r.stdout, r.stdout


def test_a_library_that_is_not_klosss_is_refused():
    code = ("import kloss, numpy as np\n"
            "try:\n"
            "    kloss.mse_loss(np.ones(2), np.ones(2))\n"
            "except kloss.LibraryNotFound as e:\n"
            "    print('refused:', e)\n")
    import ctypes.util
    libm = ctypes.util.find_library("m")
    if not libm:
        pytest.skip("no libm to load")
    libm_path = None
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"):
        if os.path.exists(os.path.join(d, libm)):
            libm_path = os.path.join(d, libm)
            break
    if libm_path is None:
        pytest.skip("libm's path not found")
    env = dict(os.environ, KLOSS_LIBRARY=libm_path)
    r = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    assert "refused:" in r.stdout and "not kloss's C API" in r.stdout, r.stdout


def test_sequence_options_are_comma_joined_strings():
    # a tuple or list of ints (or of bools) is the string option kloss takes
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((3, 4, 2, 5)), rng.standard_normal((3, 2, 5))
    want = kloss.energy_score(x, y, member_dim=1, event_dims="-2,-1", reduction="none")
    assert want.shape == (3,)
    for dims in ((-2, -1), [2, 3], (np.int64(-2), np.int32(3))):
        np.testing.assert_array_equal(kloss.energy_score(x, y, member_dim=1, event_dims=dims, reduction="none"), want)
        g = kloss.variogram_score_backward(None, x, y, member_dim=1, event_dims=dims, p=1.0)
        np.testing.assert_array_equal(g.input, kloss.variogram_score_backward(None, x, y, member_dim=1,
                                                                             event_dims="2,3", p=1.0).input)
    x1, y1 = rng.standard_normal((2, 3, 5)), rng.standard_normal((2, 5))
    np.testing.assert_array_equal(kloss.energy_score(x1, y1, event_dims=(-1,), reduction="none"),
                                  kloss.energy_score(x1, y1, reduction="none"))
    u, v = rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 4))
    want = kloss.h1_loss(u, v, grid_ndim=2, periodic="true,false")
    assert kloss.h1_loss(u, v, grid_ndim=2, periodic=(True, False)) == want
    assert kloss.h1_loss(u, v, grid_ndim=2, periodic=[np.bool_(True), False]) == want
    # other sequences stay refused
    with pytest.raises(TypeError, match="option 'event_dims'"):
        kloss.energy_score(x, y, member_dim=1, event_dims=(2.0, 3.0))
    with pytest.raises(TypeError, match="option 'periodic'"):
        kloss.h1_loss(u, v, grid_ndim=2, periodic=(True, 0))


def test_bad_event_dims_are_klosss_errors():
    x = np.random.default_rng(9).standard_normal((2, 3, 4, 5, 2))
    y = x[:, 0]
    for op in ("energy_score", "variogram_score"):
        fn = getattr(kloss, op)
        # not adjacent: axes 2 and 4 of input, 3 between them
        with pytest.raises(kloss.InvalidArgument, match=r"kloss::%s: option 'event_dims'.*adjacent" % op) as e:
            fn(x, y, member_dim=1, event_dims=(2, 4))
        assert e.value.status_name == "KLOSS_ERROR_INVALID_ARGUMENT"
        with pytest.raises(kloss.InvalidArgument, match=r"kloss::%s: option 'event_dims'.*adjacent" % op):
            fn(x, y, member_dim=1, event_dims="-3,-1")
        # the members' axis among them
        with pytest.raises(kloss.InvalidArgument, match=r"kloss::%s: option 'event_dims'.*members" % op):
            fn(x, y, member_dim=1, event_dims=(1, 2))
        with pytest.raises(kloss.InvalidArgument, match=r"kloss::%s: option 'event_dims'.*members" % op):
            fn(x, y, member_dim=-4, event_dims="-4")
        # outside input's rank
        with pytest.raises(kloss.InvalidArgument, match=r"kloss::%s: option 'event_dims'" % op):
            fn(x, y, member_dim=1, event_dims=(5,))
        # and the backward refuses them the same way
        with pytest.raises(kloss.InvalidArgument, match=r"kloss::%s.*event_dims" % op):
            getattr(kloss, op + "_backward")(None, x, y, member_dim=1, event_dims=(2, 4))


def test_multivariate_ensemble_refusals():
    x, y = np.zeros((3, 2, 4)), np.zeros((3, 4))
    with pytest.raises(kloss.InvalidArgument, match="kloss::energy_score: .*two members"):
        kloss.energy_score(x[:, :1], y, estimator="fair")
    with pytest.raises(kloss.InvalidArgument, match="kloss::variogram_score: .*two members"):
        kloss.variogram_score(x[:, :1], y, estimator="almost_fair")
    with pytest.raises(kloss.InvalidArgument, match="kloss::variogram_score: option 'p'"):
        kloss.variogram_score(x, y, p=0.0)
    with pytest.raises(kloss.DimensionMismatch, match="kloss::variogram_score: argument 'weight'"):
        kloss.variogram_score(x, y, weight=np.ones((3, 3)))
    with pytest.raises(kloss.DimensionMismatch, match="kloss::energy_score: argument 'target'"):
        kloss.energy_score(x, np.zeros((3, 2)))
    with pytest.raises(kloss.InvalidArgument, match="kloss::energy_score: option 'event_dims'"):
        kloss.energy_score(x, y, event_dims=())
    with pytest.raises(kloss.InvalidArgument, match="kloss::energy_score: option 'event_dims'.*twice"):
        kloss.energy_score(x, y, event_dims=(2, -1))


def test_quantile_loss_refusals():
    x, y, q = np.zeros((4, 3)), np.zeros((4, 1)), np.array([0.1, 0.5, 0.9])
    # option 'quantile' (one q for every element) or input 'quantiles', not both
    for v in (0.5, 0.9):
        with pytest.raises(kloss.InvalidArgument, match=r"kloss::quantile_loss: give option 'quantile' .* or input "
                                                        r"'quantiles', not both") as e:
            kloss.quantile_loss(x, y, q, quantile=v)
        assert e.value.status_name == "KLOSS_ERROR_INVALID_ARGUMENT"
    with pytest.raises(kloss.InvalidArgument, match="not both"):
        kloss.quantile_loss_backward(None, x, y, quantiles=q, quantile=0.5)
    # a quantile outside (0, 1), named with its value and position
    for bad, text in ((0.0, "0"), (1.0, "1"), (-0.5, "-0.5"), (1.5, "1.5"), (np.nan, "nan")):
        with pytest.raises(kloss.InvalidArgument, match=r"kloss::quantile_loss: argument 'quantiles' must be in "
                                                        r"\(0, 1\), got %s at position 1" % text):
            kloss.quantile_loss(x, y, np.array([0.1, bad, 0.9]))
    with pytest.raises(kloss.InvalidArgument, match="got 1.5 at position 2"):
        kloss.quantile_loss(np.zeros((2, 3, 4)), np.zeros((2, 1, 4)), np.array([[0.1], [0.5], [1.5]]),
                            reduction="none")
    # quantiles that do not broadcast with input and target
    with pytest.raises(kloss.DimensionMismatch, match=r"kloss::quantile_loss: arguments 'input' \[4, 3\] and "
                                                      r"'quantiles' \[4\] do not broadcast"):
        kloss.quantile_loss(x, y, np.full(4, 0.5))
    # the option alone is checked as before
    with pytest.raises(kloss.InvalidArgument, match="kloss::quantile_loss: option 'quantile' must be in"):
        kloss.quantile_loss(x, y, quantile=1.0)
