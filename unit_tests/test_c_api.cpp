// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The C API (kloss/c_api.h, libkloss_c): every golden case of
// data/golden/*.h5 (every op of the registry, every dtype) run through it
// and checked as kloss-validate checks them; hand-checked values; and every
// error path returning its status code and a message that names the op
// and the argument. (Kokkos is initialised by the test main, so the
// not-initialised and finalised paths are tested by c_api_from_c.c.)
#include <gtest/gtest.h>
#include <kloss/c_api.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <kloss/config.hpp>
#include <kloss/registry.hpp>
#include <kloss/version.hpp>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#ifdef KLOSS_HAVE_HDF5
#include <kloss/golden.hpp>
#endif

namespace {

// A loss object freed at scope exit.
struct Loss {
  kloss_loss* p = nullptr;
  Loss() = default;
  Loss(const char* op, int dt, int it = KLOSS_INT64) {
    EXPECT_EQ(kloss_loss_create(&p, op, dt, it), KLOSS_OK) << kloss_last_error();
  }
  ~Loss() { kloss_loss_destroy(p); }
  Loss(const Loss&) = delete;
  Loss& operator=(const Loss&) = delete;
  operator kloss_loss*() const { return p; }
};

// Expects `status` == `want` and a message containing every one of `parts`
// (the op or function, the argument, what was wrong).
void expect_error(int status, int want, std::initializer_list<const char*> parts) {
  EXPECT_EQ(status, want) << "got " << kloss_status_name(status) << ", want " << kloss_status_name(want) << ": "
                          << kloss_last_error();
  const std::string msg = kloss_last_error();
  EXPECT_FALSE(msg.empty());
  for (const char* p : parts)
    EXPECT_NE(msg.find(p), std::string::npos) << "message '" << msg << "' lacks '" << p << "'";
}

void set_f64(kloss_loss* l, const char* name, const std::vector<double>& v, std::vector<int64_t> shape) {
  ASSERT_EQ(kloss_loss_set_input(l, name, KLOSS_FLOAT64, v.data(), static_cast<int>(shape.size()), shape.data()),
            KLOSS_OK)
      << kloss_last_error();
}

// --- hand-checked values ------------------------------------------------------

// mse_loss, reduction sum: input {1,2,3,4}, target {0,2,5,4} -> 1 + 0 + 4 + 0
// = 5; d/d input = 2 (x - t) go = {2,0,-4,0} go; d/d target = -that.
TEST(CApi, MseSumValueAndGradients) {
  Loss l("mse_loss", KLOSS_FLOAT64);
  ASSERT_EQ(kloss_loss_set_option_string(l, "reduction", "sum"), KLOSS_OK);
  set_f64(l, "input", {1, 2, 3, 4}, {2, 2});
  set_f64(l, "target", {0, 2, 5, 4}, {2, 2});
  double out = 0;
  ASSERT_EQ(kloss_loss_forward(l, KLOSS_FLOAT64, &out, 1), KLOSS_OK) << kloss_last_error();
  EXPECT_DOUBLE_EQ(out, 5.0);
  EXPECT_STREQ(kloss_last_error(), "");
  int ndim = -1;
  int64_t shape[KLOSS_MAX_RANK];
  ASSERT_EQ(kloss_loss_output_shape(l, &ndim, shape), KLOSS_OK);
  EXPECT_EQ(ndim, 0);

  const double go = 0.5;
  ASSERT_EQ(kloss_loss_backward(l, KLOSS_FLOAT64, &go, 1), KLOSS_OK) << kloss_last_error();
  std::vector<double> gi(4), gt(4);
  ASSERT_EQ(kloss_loss_get_grad(l, "input", KLOSS_FLOAT64, gi.data(), 4), KLOSS_OK);
  ASSERT_EQ(kloss_loss_get_grad(l, "target", KLOSS_FLOAT64, gt.data(), 4), KLOSS_OK);
  EXPECT_EQ(gi, (std::vector<double>{1, 0, -2, 0}));
  EXPECT_EQ(gt, (std::vector<double>{-1, 0, 2, 0}));
  ASSERT_EQ(kloss_loss_get_output(l, KLOSS_FLOAT64, &out, 1), KLOSS_OK);
  EXPECT_DOUBLE_EQ(out, 5.0);

  // Without a grad_output the upstream gradient is one.
  ASSERT_EQ(kloss_loss_backward(l, KLOSS_FLOAT64, nullptr, 0), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_get_grad(l, "input", KLOSS_FLOAT64, gi.data(), 4), KLOSS_OK);
  EXPECT_EQ(gi, (std::vector<double>{2, 0, -4, 0}));
}

// Borrowed buffers (the zero-copy path): mse_loss, reduction mean, float32.
// Each run reads the caller's current values and writes the loss and the
// gradients straight into the caller's buffers. Input {1,2,3,4}, target
// {0,2,5,4}: mean = 5 / 4, d/d input = 2 (x - t) / 4 = {0.5, 0, -1, 0};
// after input[2] = 5 in place: mean = 1 / 4, d/d input = {0.5, 0, 0, 0}.
TEST(CApi, BorrowedBuffersAreReadAndWrittenInPlace) {
  Loss l("mse_loss", KLOSS_FLOAT32);
  std::vector<float> x{1, 2, 3, 4}, t{0, 2, 5, 4}, gx(4, std::nanf("")), gt(4, std::nanf(""));
  float out = std::nanf("");
  const int64_t shape[1] = {4};
  ASSERT_EQ(kloss_loss_borrow_input(l, "input", KLOSS_FLOAT32, x.data(), 1, shape), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_borrow_input(l, "target", KLOSS_FLOAT32, t.data(), 1, shape), KLOSS_OK);
  ASSERT_EQ(kloss_loss_borrow_output(l, KLOSS_FLOAT32, &out, 1), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_borrow_grad(l, "input", KLOSS_FLOAT32, gx.data(), 4), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_borrow_grad(l, "target", KLOSS_FLOAT32, gt.data(), 4), KLOSS_OK);
  ASSERT_EQ(kloss_loss_backward(l, KLOSS_FLOAT32, nullptr, 0), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_fence(), KLOSS_OK);
  EXPECT_EQ(out, 1.25f);
  EXPECT_EQ(gx, (std::vector<float>{0.5f, 0, -1, 0}));
  EXPECT_EQ(gt, (std::vector<float>{-0.5f, 0, 1, 0}));
  x[2] = 5;  // the caller updates its array in place; no new borrow
  ASSERT_EQ(kloss_loss_backward(l, KLOSS_FLOAT32, nullptr, 0), KLOSS_OK) << kloss_last_error();
  EXPECT_EQ(out, 0.25f);
  EXPECT_EQ(gx, (std::vector<float>{0.5f, 0, 0, 0}));
  // the forward writes the borrowed output too; get_output still copies it
  out = -1;
  ASSERT_EQ(kloss_loss_forward(l, KLOSS_FLOAT32, nullptr, 0), KLOSS_OK) << kloss_last_error();
  EXPECT_EQ(out, 0.25f);
  float copy = 0;
  ASSERT_EQ(kloss_loss_get_output(l, KLOSS_FLOAT32, &copy, 1), KLOSS_OK);
  EXPECT_EQ(copy, 0.25f);
  // reduction none: a borrowed output of one element no longer fits
  ASSERT_EQ(kloss_loss_set_option_string(l, "reduction", "none"), KLOSS_OK);
  expect_error(kloss_loss_forward(l, KLOSS_FLOAT32, nullptr, 0), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"mse_loss", "output", "holds 1 elements", "[4]"});
  std::vector<float> none(4, std::nanf(""));
  ASSERT_EQ(kloss_loss_borrow_output(l, KLOSS_FLOAT32, none.data(), 4), KLOSS_OK);
  ASSERT_EQ(kloss_loss_forward(l, KLOSS_FLOAT32, nullptr, 0), KLOSS_OK) << kloss_last_error();
  EXPECT_EQ(none, (std::vector<float>{1, 0, 0, 0}));
  // ending the borrows: results go to kloss's buffers again
  ASSERT_EQ(kloss_loss_borrow_output(l, KLOSS_FLOAT32, nullptr, 0), KLOSS_OK);
  ASSERT_EQ(kloss_loss_borrow_grad(l, "input", KLOSS_FLOAT32, nullptr, 0), KLOSS_OK);
  none.assign(4, -7);
  // the last result kept its values, not the caller's array
  std::vector<float> kept(4);
  ASSERT_EQ(kloss_loss_get_output(l, KLOSS_FLOAT32, kept.data(), 4), KLOSS_OK) << kloss_last_error();
  EXPECT_EQ(kept, (std::vector<float>{1, 0, 0, 0}));
  gx.assign(4, -7);
  const std::vector<float> go{1, 1, 1, 1};
  ASSERT_EQ(kloss_loss_backward(l, KLOSS_FLOAT32, go.data(), 4), KLOSS_OK) << kloss_last_error();
  EXPECT_EQ(none, (std::vector<float>(4, -7)));
  EXPECT_EQ(gx, (std::vector<float>(4, -7)));
  std::vector<float> g(4);
  ASSERT_EQ(kloss_loss_get_grad(l, "input", KLOSS_FLOAT32, g.data(), 4), KLOSS_OK);
  EXPECT_EQ(g, (std::vector<float>{2, 0, 0, 0}));
  EXPECT_EQ(gt, (std::vector<float>{-2, 0, 0, 0}));  // still borrowed
}

TEST(CApiErrors, Borrowing) {
  Loss l("cross_entropy", KLOSS_FLOAT32);
  float buf[4] = {};
  const int64_t shape[1] = {4};
  expect_error(kloss_loss_borrow_input(l, "logits", KLOSS_FLOAT32, buf, 1, shape), KLOSS_ERROR_NOT_IMPLEMENTED,
               {"cross_entropy", "'logits'", "input, target"});
  expect_error(kloss_loss_borrow_input(l, "input", KLOSS_FLOAT64, buf, 1, shape), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'input'", "float64"});
  expect_error(kloss_loss_borrow_input(l, "input", KLOSS_FLOAT32, nullptr, 1, shape), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'input'", "NULL"});
  expect_error(kloss_loss_borrow_output(l, KLOSS_FLOAT64, buf, 1), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "output", "float64", "float32"});
  expect_error(kloss_loss_borrow_output(l, KLOSS_FLOAT32, nullptr, 1), KLOSS_ERROR_NULL_POINTER, {"output"});
  expect_error(kloss_loss_borrow_grad(l, "target_lengths", KLOSS_FLOAT32, buf, 4), KLOSS_ERROR_NOT_IMPLEMENTED,
               {"cross_entropy", "'target_lengths'", "no gradient"});
  expect_error(kloss_loss_borrow_grad(l, "input", KLOSS_INT32, buf, 4), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "grad", "int32"});
  expect_error(kloss_loss_borrow_grad(nullptr, "input", KLOSS_FLOAT32, buf, 4), KLOSS_ERROR_NULL_POINTER, {"loss"});
  // a gradient buffer of the wrong size: found at the backward
  const int64_t x_shape[2] = {1, 4}, t_shape[1] = {1};
  const int64_t target = 2;
  ASSERT_EQ(kloss_loss_borrow_input(l, "input", KLOSS_FLOAT32, buf, 2, x_shape), KLOSS_OK);
  ASSERT_EQ(kloss_loss_set_input(l, "target", KLOSS_INT64, &target, 1, t_shape), KLOSS_OK);
  float small[3];
  ASSERT_EQ(kloss_loss_borrow_grad(l, "input", KLOSS_FLOAT32, small, 3), KLOSS_OK);
  expect_error(kloss_loss_backward(l, KLOSS_FLOAT32, nullptr, 0), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"cross_entropy", "grad of 'input'", "holds 3 elements", "[1, 4]"});
}

// The same mse_loss with every buffer in Kokkos' default memory space
// (device memory in a GPU build) after kloss_loss_set_memory.
TEST(CApi, DeviceMemoryBuffers) {
  using DevMem = Kokkos::DefaultExecutionSpace::memory_space;
  Loss l("mse_loss", KLOSS_FLOAT64);
  ASSERT_EQ(kloss_loss_set_memory(l, KLOSS_MEMORY_DEVICE), KLOSS_OK) << kloss_last_error();
  const int host_accessible = Kokkos::SpaceAccessibility<Kokkos::HostSpace, DevMem>::accessible ? 1 : 0;
  EXPECT_EQ(kloss_device_memory_is_host(), host_accessible);
  ASSERT_EQ(kloss_loss_set_option_string(l, "reduction", "sum"), KLOSS_OK);
  auto device = [](const std::vector<double>& v) {
    Kokkos::View<double*, DevMem> d("kloss_test::device_buffer", v.size());
    Kokkos::deep_copy(d, Kokkos::View<const double*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                             v.data(), v.size()));
    return d;
  };
  auto host = [](const Kokkos::View<double*, DevMem>& d) {
    std::vector<double> v(d.size());
    Kokkos::deep_copy(Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(v.data(), v.size()),
                      d);
    return v;
  };
  const int64_t shape[2] = {2, 2};
  const auto x = device({1, 2, 3, 4}), t = device({0, 2, 5, 4}), go = device({0.5});
  ASSERT_EQ(kloss_loss_set_input(l, "input", KLOSS_FLOAT64, x.data(), 2, shape), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_set_input(l, "target", KLOSS_FLOAT64, t.data(), 2, shape), KLOSS_OK) << kloss_last_error();
  Kokkos::View<double*, DevMem> out("kloss_test::out", 1), gi("kloss_test::gi", 4), gt("kloss_test::gt", 4);
  ASSERT_EQ(kloss_loss_forward(l, KLOSS_FLOAT64, out.data(), 1), KLOSS_OK) << kloss_last_error();
  EXPECT_EQ(host(out), (std::vector<double>{5}));
  ASSERT_EQ(kloss_loss_backward(l, KLOSS_FLOAT64, go.data(), 1), KLOSS_OK) << kloss_last_error();
  ASSERT_EQ(kloss_loss_get_grad(l, "input", KLOSS_FLOAT64, gi.data(), 4), KLOSS_OK);
  ASSERT_EQ(kloss_loss_get_grad(l, "target", KLOSS_FLOAT64, gt.data(), 4), KLOSS_OK);
  EXPECT_EQ(host(gi), (std::vector<double>{1, 0, -2, 0}));
  EXPECT_EQ(host(gt), (std::vector<double>{-1, 0, 2, 0}));
  Kokkos::deep_copy(out, 0.0);
  ASSERT_EQ(kloss_loss_get_output(l, KLOSS_FLOAT64, out.data(), 1), KLOSS_OK);
  EXPECT_EQ(host(out), (std::vector<double>{5}));

  // Back to host buffers on the same loss.
  ASSERT_EQ(kloss_loss_set_memory(l, KLOSS_MEMORY_HOST), KLOSS_OK);
  double h = 0;
  ASSERT_EQ(kloss_loss_get_output(l, KLOSS_FLOAT64, &h, 1), KLOSS_OK);
  EXPECT_EQ(h, 5.0);
  expect_error(kloss_loss_set_memory(l, 2), KLOSS_ERROR_INVALID_ARGUMENT, {"mse_loss", "'memory'", "got 2"});
  expect_error(kloss_loss_set_memory(nullptr, KLOSS_MEMORY_HOST), KLOSS_ERROR_NULL_POINTER,
               {"kloss_loss_set_memory", "'loss'"});
}

// reduction none: the output has the input's shape, which
// kloss_loss_output_shape reports after a forward that only computes.
TEST(CApi, ReductionNoneOutputShapeAndUpstreamGradient) {
  Loss l("l1_loss", KLOSS_FLOAT32);
  ASSERT_EQ(kloss_loss_set_option_string(l, "reduction", "none"), KLOSS_OK);
  const std::vector<float> x{1, -2, 3, 0.5f, 0, 7}, t{0, 0, 0, 0, 1, 7};
  const int64_t s[2] = {3, 2};
  ASSERT_EQ(kloss_loss_set_input(l, "input", KLOSS_FLOAT32, x.data(), 2, s), KLOSS_OK);
  ASSERT_EQ(kloss_loss_set_input(l, "target", KLOSS_FLOAT32, t.data(), 2, s), KLOSS_OK);
  ASSERT_EQ(kloss_loss_forward(l, KLOSS_FLOAT32, nullptr, 0), KLOSS_OK) << kloss_last_error();
  int ndim = 0;
  int64_t shape[KLOSS_MAX_RANK];
  ASSERT_EQ(kloss_loss_output_shape(l, &ndim, shape), KLOSS_OK);
  ASSERT_EQ(ndim, 2);
  EXPECT_EQ(shape[0], 3);
  EXPECT_EQ(shape[1], 2);
  std::vector<float> out(6);
  ASSERT_EQ(kloss_loss_get_output(l, KLOSS_FLOAT32, out.data(), 6), KLOSS_OK);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 0.5f, 1, 0}));
  // d|x - t|/dx = sign(x - t) (0 at a tie, as torch), times grad_output.
  const std::vector<float> go{1, 2, 3, 4, 5, 6};
  ASSERT_EQ(kloss_loss_backward(l, KLOSS_FLOAT32, go.data(), 6), KLOSS_OK) << kloss_last_error();
  std::vector<float> g(6);
  ASSERT_EQ(kloss_loss_get_grad(l, "input", KLOSS_FLOAT32, g.data(), 6), KLOSS_OK);
  EXPECT_EQ(g, (std::vector<float>{1, -2, 3, 4, -5, 0}));
}

// cross_entropy on [2, 3] logits, int32 targets: row 0 all zeros, target 1
// -> ln 3; row 1 {0, 0, ln 2}, target 2 -> softmax {1/4, 1/4, 1/2}, loss
// ln 2; mean (ln 3 + ln 2) / 2. Gradient (softmax - onehot) / 2.
TEST(CApi, CrossEntropyInt32TargetsHandChecked) {
  Loss l("cross_entropy", KLOSS_FLOAT64, KLOSS_INT32);
  set_f64(l, "input", {0, 0, 0, 0, 0, std::log(2.0)}, {2, 3});
  const std::vector<int32_t> tgt{1, 2};
  const int64_t n = 2;
  ASSERT_EQ(kloss_loss_set_input(l, "target", KLOSS_INT32, tgt.data(), 1, &n), KLOSS_OK);
  ASSERT_EQ(kloss_loss_backward(l, KLOSS_FLOAT64, nullptr, 0), KLOSS_OK) << kloss_last_error();
  double out = 0;
  ASSERT_EQ(kloss_loss_get_output(l, KLOSS_FLOAT64, &out, 1), KLOSS_OK);
  EXPECT_NEAR(out, 0.5 * std::log(6.0), 1e-15);
  std::vector<double> g(6);
  ASSERT_EQ(kloss_loss_get_grad(l, "input", KLOSS_FLOAT64, g.data(), 6), KLOSS_OK);
  const std::vector<double> want{1.0 / 6, -1.0 / 3, 1.0 / 6, 1.0 / 8, 1.0 / 8, -1.0 / 4};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(g[i], want[i], 1e-15) << i;
}

// An option set by name reaches the op: huber_loss with delta 0.5 on a
// residual of 2 is delta (|r| - delta / 2) = 0.875.
TEST(CApi, RealOptionReachesTheOp) {
  Loss l("huber_loss", KLOSS_FLOAT64);
  ASSERT_EQ(kloss_loss_set_option_real(l, "delta", 0.5), KLOSS_OK);
  set_f64(l, "input", {2}, {1});
  set_f64(l, "target", {0}, {1});
  double out = 0;
  ASSERT_EQ(kloss_loss_forward(l, KLOSS_FLOAT64, &out, 1), KLOSS_OK) << kloss_last_error();
  EXPECT_DOUBLE_EQ(out, 0.875);
  // Inputs are copied when set: the caller's buffer may change afterwards.
  std::vector<double> x{2};
  const int64_t one = 1;
  ASSERT_EQ(kloss_loss_set_input(l, "input", KLOSS_FLOAT64, x.data(), 1, &one), KLOSS_OK);
  x[0] = 100;
  ASSERT_EQ(kloss_loss_forward(l, KLOSS_FLOAT64, &out, 1), KLOSS_OK);
  EXPECT_DOUBLE_EQ(out, 0.875);
}

// --- golden cases -------------------------------------------------------------
#ifdef KLOSS_HAVE_HDF5

kloss_dtype c_dtype(kloss::rt::DType d) {
  using kloss::rt::DType;
  const std::pair<DType, kloss_dtype> to_c[] = {{DType::float32, KLOSS_FLOAT32}, {DType::float64, KLOSS_FLOAT64},
                                                {DType::float16, KLOSS_FLOAT16}, {DType::bfloat16, KLOSS_BFLOAT16},
                                                {DType::int32, KLOSS_INT32},     {DType::int64, KLOSS_INT64}};
  for (const auto& [r, c] : to_c)
    if (r == d) return c;
  return KLOSS_FLOAT32;
}

std::vector<int64_t> extents(const kloss::Shape& s) { return std::vector<int64_t>(s.extent, s.extent + s.rank); }

// Sets every option of a golden case on a loss; the first failing status.
int set_options(kloss_loss* l, const kloss::rt::Options& options) {
  for (const auto& [name, v] : options.values()) {
    int s = 0;
    if (auto i = std::get_if<std::int64_t>(&v))
      s = kloss_loss_set_option_int(l, name.c_str(), *i);
    else if (auto d = std::get_if<double>(&v))
      s = kloss_loss_set_option_real(l, name.c_str(), *d);
    else
      s = kloss_loss_set_option_string(l, name.c_str(), std::get<std::string>(v).c_str());
    if (s) return s;
  }
  return KLOSS_OK;
}

// Runs one golden case through the C API and returns the result as the
// runtime API would, so that golden::check_result judges it.
kloss::rt::Result run_through_c(const kloss::golden::Case& c, std::string& error) {
  kloss::rt::Result r;
  const int dt = c_dtype(c.call.dtype);
  auto fail = [&](const char* what, int s) {
    error = std::string(what) + ": " + kloss_status_name(s) + ": " + kloss_last_error();
    return r;
  };
  Loss l;
  int s = kloss_loss_create(&l.p, c.call.op.c_str(), dt, c_dtype(c.call.index_dtype));
  if (s) return fail("create", s);
  if ((s = set_options(l, c.call.options))) return fail("set_option", s);
  for (const auto& [name, b] : c.call.inputs) {
    auto ext = extents(b.shape());
    s = kloss_loss_set_input(l, name.c_str(), c_dtype(b.dtype()), b.data(), b.shape().rank, ext.data());
    if (s) return fail("set_input", s);
  }
  if (c.call.grad_output)
    s = kloss_loss_backward(l, dt, c.call.grad_output->data(), c.call.grad_output->numel());
  else
    s = kloss_loss_forward(l, dt, nullptr, 0);
  if (s) return fail("run", s);
  int ndim = 0;
  int64_t shape[KLOSS_MAX_RANK];
  if ((s = kloss_loss_output_shape(l, &ndim, shape))) return fail("output_shape", s);
  r.output = kloss::rt::Buffer(c.call.dtype, kloss::Shape(std::vector<int64_t>(shape, shape + ndim)));
  if ((s = kloss_loss_get_output(l, dt, r.output.data(), r.output.numel()))) return fail("get_output", s);
  for (const auto& [name, exp] : c.grads) {
    auto in = c.call.inputs.find(name);
    if (in == c.call.inputs.end()) continue;  // check_result reports the missing gradient
    kloss::rt::Buffer g(c.call.dtype, in->second.shape());
    if ((s = kloss_loss_get_grad(l, name.c_str(), dt, g.data(), g.numel()))) return fail("get_grad", s);
    r.grads[name] = std::move(g);
  }
  return r;
}

// A buffer of dtype `dt` and `shape` whose every element is NaN (a result
// kloss writes into must overwrite each one).
kloss::rt::Buffer nan_filled(kloss::rt::DType dt, const kloss::Shape& s) {
  return kloss::rt::Buffer::from_doubles(dt, s, std::vector<double>(static_cast<std::size_t>(s.numel()), std::nan("")));
}

// Runs one golden case through the C API's zero-copy path: every input
// borrowed, the output and every expected gradient written by the run
// straight into caller buffers that held NaN; the result is read from those
// buffers (not through get_output / get_grad). Also checks that the run left
// every borrowed input as it was.
kloss::rt::Result run_borrowed_through_c(const kloss::golden::Case& c, std::string& error) {
  kloss::rt::Result r;
  const int dt = c_dtype(c.call.dtype);
  auto fail = [&](const char* what, int s) {
    error = std::string(what) + ": " + kloss_status_name(s) + ": " + kloss_last_error();
    return r;
  };
  Loss l;
  int s = kloss_loss_create(&l.p, c.call.op.c_str(), dt, c_dtype(c.call.index_dtype));
  if (s) return fail("create", s);
  if ((s = set_options(l, c.call.options))) return fail("set_option", s);
  std::map<std::string, std::vector<double>> before;
  for (const auto& [name, b] : c.call.inputs) {
    auto ext = extents(b.shape());
    before[name] = b.to_doubles();
    s = kloss_loss_borrow_input(l, name.c_str(), c_dtype(b.dtype()), b.data(), b.shape().rank, ext.data());
    if (s) return fail("borrow_input", s);
  }
  r.output = nan_filled(c.call.dtype, c.output.shape);
  if ((s = kloss_loss_borrow_output(l, dt, r.output.data(), r.output.numel()))) return fail("borrow_output", s);
  if (c.call.grad_output)
    for (const auto& [name, exp] : c.grads) {
      auto in = c.call.inputs.find(name);
      if (in == c.call.inputs.end()) continue;  // check_result reports the missing gradient
      r.grads[name] = nan_filled(c.call.dtype, in->second.shape());
      if ((s = kloss_loss_borrow_grad(l, name.c_str(), dt, r.grads[name].data(), r.grads[name].numel())))
        return fail("borrow_grad", s);
    }
  if (c.call.grad_output)
    s = kloss_loss_backward(l, dt, c.call.grad_output->data(), c.call.grad_output->numel());
  else
    s = kloss_loss_forward(l, dt, nullptr, 0);
  if (s) return fail("run", s);
  if ((s = kloss_fence())) return fail("fence", s);
  // embedding's max_norm renormalises the looked-up rows of its weight in
  // place, as torch does
  const bool renormalises = c.call.options.has("max_norm");
  for (const auto& [name, b] : c.call.inputs) {
    const std::vector<double> after = b.to_doubles();
    bool same = after.size() == before[name].size();
    for (std::size_t i = 0; same && i < after.size(); ++i)
      same = after[i] == before[name][i] || (std::isnan(after[i]) && std::isnan(before[name][i]));
    if (!same && !(renormalises && name == "weight")) {
      error = "the run changed borrowed input '" + name + "'";
      return r;
    }
  }
  return r;
}

TEST(CApi, EveryGoldenCaseOfEveryOpZeroCopy) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(std::string(KLOSS_SOURCE_DIR) + "/data/golden"))
    if (e.path().extension() == ".h5") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 6u);
  int cases = 0;
  for (const auto& path : files) {
    kloss::golden::GoldenFile f(path);
    for (const auto& name : f.case_names()) {
      const auto c = f.read_case(name);
      std::string error;
      const auto r = run_borrowed_through_c(c, error);
      ASSERT_TRUE(error.empty()) << path << ": case " << name << ": " << error;
      const auto rep = kloss::golden::check_result(c, r);
      EXPECT_TRUE(rep.passed) << path << ": case " << name << ": " << rep.reason;
      ++cases;
    }
  }
  std::printf("%d golden cases through the C API's borrowed buffers\n", cases);
}

TEST(CApi, EveryGoldenCaseOfEveryOp) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(std::string(KLOSS_SOURCE_DIR) + "/data/golden"))
    if (e.path().extension() == ".h5") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 6u);
  std::set<std::string> ops_seen;
  int cases = 0;
  for (const auto& path : files) {
    kloss::golden::GoldenFile f(path);
    for (const auto& name : f.case_names()) {
      const auto c = f.read_case(name);
      std::string error;
      const auto r = run_through_c(c, error);
      ASSERT_TRUE(error.empty()) << path << ": case " << name << ": " << error;
      const auto rep = kloss::golden::check_result(c, r);
      EXPECT_TRUE(rep.passed) << path << ": case " << name << ": " << rep.reason;
      ops_seen.insert(c.call.op);
      ++cases;
    }
  }
  for (const auto& op : kloss::ops())
    EXPECT_TRUE(ops_seen.count(std::string(op.name))) << op.name << ": no golden case";
  std::printf("%d golden cases of %zu ops through the C API\n", cases, ops_seen.size());
}
#endif

// --- error paths ----------------------------------------------------------------

TEST(CApiErrors, Create) {
  kloss_loss* l = reinterpret_cast<kloss_loss*>(0x1);
  expect_error(kloss_loss_create(nullptr, "mse_loss", KLOSS_FLOAT32, KLOSS_INT64), KLOSS_ERROR_NULL_POINTER,
               {"kloss_loss_create", "'loss'"});
  expect_error(kloss_loss_create(&l, nullptr, KLOSS_FLOAT32, KLOSS_INT64), KLOSS_ERROR_NULL_POINTER,
               {"kloss_loss_create", "'op'"});
  EXPECT_EQ(l, nullptr);
  l = reinterpret_cast<kloss_loss*>(0x1);
  expect_error(kloss_loss_create(&l, "mse_los", KLOSS_FLOAT32, KLOSS_INT64), KLOSS_ERROR_NOT_IMPLEMENTED,
               {"mse_los", "no such op"});
  EXPECT_EQ(l, nullptr);
  expect_error(kloss_loss_create(&l, "mse_loss", 17, KLOSS_INT64), KLOSS_ERROR_INVALID_ARGUMENT,
               {"mse_loss", "'dtype'", "17"});
  expect_error(kloss_loss_create(&l, "mse_loss", KLOSS_INT32, KLOSS_INT64), KLOSS_ERROR_INVALID_ARGUMENT,
               {"mse_loss", "'dtype'", "floating", "int32"});
  expect_error(kloss_loss_create(&l, "cross_entropy", KLOSS_FLOAT32, KLOSS_FLOAT64), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'index_dtype'", "float64"});
  EXPECT_EQ(l, nullptr);
  // Destroying NULL is allowed and keeps the last message.
  EXPECT_EQ(kloss_loss_destroy(nullptr), KLOSS_OK);
  EXPECT_NE(std::string(kloss_last_error()).find("index_dtype"), std::string::npos);
}

TEST(CApiErrors, NullLossEverywhere) {
  int ndim;
  int64_t shape[KLOSS_MAX_RANK];
  double x = 0;
  const int64_t one = 1;
  expect_error(kloss_loss_set_option_int(nullptr, "p", 1), KLOSS_ERROR_NULL_POINTER, {"set_option_int", "'loss'"});
  expect_error(kloss_loss_set_option_real(nullptr, "p", 1), KLOSS_ERROR_NULL_POINTER, {"set_option_real", "'loss'"});
  expect_error(kloss_loss_set_option_string(nullptr, "reduction", "sum"), KLOSS_ERROR_NULL_POINTER,
               {"set_option_string", "'loss'"});
  expect_error(kloss_loss_set_input(nullptr, "input", KLOSS_FLOAT64, &x, 1, &one), KLOSS_ERROR_NULL_POINTER,
               {"set_input", "'loss'"});
  expect_error(kloss_loss_clear_input(nullptr, "input"), KLOSS_ERROR_NULL_POINTER, {"clear_input", "'loss'"});
  expect_error(kloss_loss_forward(nullptr, KLOSS_FLOAT64, &x, 1), KLOSS_ERROR_NULL_POINTER, {"forward", "'loss'"});
  expect_error(kloss_loss_backward(nullptr, KLOSS_FLOAT64, nullptr, 0), KLOSS_ERROR_NULL_POINTER,
               {"backward", "'loss'"});
  expect_error(kloss_loss_output_shape(nullptr, &ndim, shape), KLOSS_ERROR_NULL_POINTER, {"output_shape", "'loss'"});
  expect_error(kloss_loss_get_output(nullptr, KLOSS_FLOAT64, &x, 1), KLOSS_ERROR_NULL_POINTER,
               {"get_output", "'loss'"});
  expect_error(kloss_loss_get_grad(nullptr, "input", KLOSS_FLOAT64, &x, 1), KLOSS_ERROR_NULL_POINTER,
               {"get_grad", "'loss'"});
}

TEST(CApiErrors, NullArguments) {
  Loss l("mse_loss", KLOSS_FLOAT64);
  double x = 0;
  int ndim;
  int64_t shape[KLOSS_MAX_RANK];
  expect_error(kloss_loss_set_option_int(l, nullptr, 1), KLOSS_ERROR_NULL_POINTER, {"'name'"});
  expect_error(kloss_loss_set_option_string(l, "reduction", nullptr), KLOSS_ERROR_NULL_POINTER, {"'value'"});
  expect_error(kloss_loss_set_input(l, nullptr, KLOSS_FLOAT64, &x, 0, nullptr), KLOSS_ERROR_NULL_POINTER, {"'name'"});
  expect_error(kloss_loss_set_input(l, "input", KLOSS_FLOAT64, &x, 1, nullptr), KLOSS_ERROR_NULL_POINTER, {"'shape'"});
  expect_error(kloss_loss_clear_input(l, nullptr), KLOSS_ERROR_NULL_POINTER, {"'name'"});
  expect_error(kloss_loss_forward(l, KLOSS_FLOAT64, nullptr, 1), KLOSS_ERROR_NULL_POINTER, {"'output'"});
  expect_error(kloss_loss_output_shape(l, nullptr, shape), KLOSS_ERROR_NULL_POINTER, {"'ndim'"});
  expect_error(kloss_loss_output_shape(l, &ndim, nullptr), KLOSS_ERROR_NULL_POINTER, {"'shape'"});
  expect_error(kloss_loss_get_output(l, KLOSS_FLOAT64, nullptr, 1), KLOSS_ERROR_NULL_POINTER, {"'output'"});
  expect_error(kloss_loss_get_grad(l, nullptr, KLOSS_FLOAT64, &x, 1), KLOSS_ERROR_NULL_POINTER, {"'name'"});
  expect_error(kloss_loss_get_grad(l, "input", KLOSS_FLOAT64, nullptr, 1), KLOSS_ERROR_NULL_POINTER, {"'grad'"});
}

TEST(CApiErrors, Options) {
  Loss l("mse_loss", KLOSS_FLOAT64);
  expect_error(kloss_loss_set_option_real(l, "margin", 1.0), KLOSS_ERROR_NOT_IMPLEMENTED,
               {"mse_loss", "'margin'", "its options: reduction"});
  set_f64(l, "input", {1}, {1});
  set_f64(l, "target", {0}, {1});
  double out;
  // Values are checked when the op runs.
  ASSERT_EQ(kloss_loss_set_option_string(l, "reduction", "average"), KLOSS_OK);
  expect_error(kloss_loss_forward(l, KLOSS_FLOAT64, &out, 1), KLOSS_ERROR_INVALID_ARGUMENT,
               {"mse_loss", "reduction", "'average'"});
  ASSERT_EQ(kloss_loss_set_option_int(l, "reduction", 2), KLOSS_OK);
  expect_error(kloss_loss_forward(l, KLOSS_FLOAT64, &out, 1), KLOSS_ERROR_INVALID_ARGUMENT,
               {"mse_loss", "'reduction'", "string"});
  Loss h("huber_loss", KLOSS_FLOAT64);
  ASSERT_EQ(kloss_loss_set_option_string(h, "delta", "big"), KLOSS_OK);
  set_f64(h, "input", {1}, {1});
  set_f64(h, "target", {0}, {1});
  expect_error(kloss_loss_forward(h, KLOSS_FLOAT64, &out, 1), KLOSS_ERROR_INVALID_ARGUMENT,
               {"huber_loss", "'delta'", "real number", "'big'"});
  Loss c("cross_entropy", KLOSS_FLOAT64);
  ASSERT_EQ(kloss_loss_set_option_real(c, "label_smoothing", 1.5), KLOSS_OK);
  set_f64(c, "input", {0, 0}, {1, 2});
  const int64_t t = 0, n = 1;
  ASSERT_EQ(kloss_loss_set_input(c, "target", KLOSS_INT64, &t, 1, &n), KLOSS_OK);
  expect_error(kloss_loss_forward(c, KLOSS_FLOAT64, &out, 1), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "label_smoothing"});
}

TEST(CApiErrors, Inputs) {
  Loss l("cross_entropy", KLOSS_FLOAT32, KLOSS_INT64);
  const float x[6] = {0, 0, 0, 0, 0, 0};
  const int32_t t32[2] = {0, 1};
  const int64_t s23[2] = {2, 3}, s2 = 2, bad_rank[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, neg[2] = {2, -3};
  expect_error(kloss_loss_set_input(l, "logits", KLOSS_FLOAT32, x, 2, s23), KLOSS_ERROR_NOT_IMPLEMENTED,
               {"cross_entropy", "'logits'", "its inputs: input, target, weight"});
  expect_error(kloss_loss_set_input(l, "input", KLOSS_FLOAT64, x, 2, s23), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'input'", "float64", "float32"});
  expect_error(kloss_loss_set_input(l, "target", KLOSS_INT32, t32, 1, &s2), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'target'", "int32", "int64"});
  expect_error(kloss_loss_set_input(l, "input", -1, x, 2, s23), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'dtype'", "-1"});
  expect_error(kloss_loss_set_input(l, "input", KLOSS_FLOAT32, x, 9, bad_rank), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"cross_entropy", "'input'", "rank 9"});
  expect_error(kloss_loss_set_input(l, "input", KLOSS_FLOAT32, x, -1, s23), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"cross_entropy", "'input'", "rank -1"});
  expect_error(kloss_loss_set_input(l, "input", KLOSS_FLOAT32, x, 2, neg), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"cross_entropy", "'input'", "extent -3"});
  expect_error(kloss_loss_set_input(l, "input", KLOSS_FLOAT32, nullptr, 2, s23), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'input'", "NULL", "[2, 3]"});
  const int64_t huge[2] = {int64_t(1) << 40, int64_t(1) << 40};
  expect_error(kloss_loss_set_input(l, "input", KLOSS_FLOAT32, x, 2, huge), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"cross_entropy", "'input'", "too many elements"});
  // An empty buffer may have a NULL data pointer.
  const int64_t s03[2] = {0, 3};
  EXPECT_EQ(kloss_loss_set_input(l, "input", KLOSS_FLOAT32, nullptr, 2, s03), KLOSS_OK) << kloss_last_error();
}

// (AddressSanitizer, GCC's or clang's, aborts on an allocation this large
// instead of failing it.)
#if defined(__SANITIZE_ADDRESS__)
#define KLOSS_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KLOSS_TEST_ASAN 1
#endif
#endif
#if !defined(KLOSS_TEST_ASAN)
TEST(CApiErrors, OutOfMemory) {
  Loss l("mse_loss", KLOSS_FLOAT64);
  const double x = 0;
  const int64_t s[1] = {int64_t(1) << 52};
  expect_error(kloss_loss_set_input(l, "input", KLOSS_FLOAT64, &x, 1, s), KLOSS_ERROR_OUT_OF_MEMORY, {"out of memory"});
}
#endif

TEST(CApiErrors, RunningAndResults) {
  Loss l("cross_entropy", KLOSS_FLOAT32, KLOSS_INT64);
  float out = 0, g[6];
  int ndim;
  int64_t shape[KLOSS_MAX_RANK];
  // Nothing run yet.
  expect_error(kloss_loss_output_shape(l, &ndim, shape), KLOSS_ERROR_INVALID_STATE, {"cross_entropy", "no output"});
  expect_error(kloss_loss_get_output(l, KLOSS_FLOAT32, &out, 1), KLOSS_ERROR_INVALID_STATE,
               {"cross_entropy", "no output"});
  expect_error(kloss_loss_get_grad(l, "input", KLOSS_FLOAT32, g, 6), KLOSS_ERROR_INVALID_STATE,
               {"cross_entropy", "no gradients"});
  // A missing input.
  const float x[6] = {0, 0, 0, 0, 0, 0};
  const int64_t s23[2] = {2, 3}, s2 = 2, s3 = 3;
  ASSERT_EQ(kloss_loss_set_input(l, "input", KLOSS_FLOAT32, x, 2, s23), KLOSS_OK);
  expect_error(kloss_loss_forward(l, KLOSS_FLOAT32, &out, 1), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'target'", "missing"});
  // Shapes that disagree.
  const int64_t t3[3] = {0, 1, 2};
  ASSERT_EQ(kloss_loss_set_input(l, "target", KLOSS_INT64, t3, 1, &s3), KLOSS_OK);
  expect_error(kloss_loss_forward(l, KLOSS_FLOAT32, &out, 1), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"cross_entropy", "target"});
  // A class index outside [0, C).
  const int64_t t_bad[2] = {0, 3};
  ASSERT_EQ(kloss_loss_set_input(l, "target", KLOSS_INT64, t_bad, 1, &s2), KLOSS_OK);
  expect_error(kloss_loss_forward(l, KLOSS_FLOAT32, &out, 1), KLOSS_ERROR_INDEX_OUT_OF_RANGE,
               {"cross_entropy", "'target'", "3"});
  const int64_t t_ok[2] = {0, 2};
  ASSERT_EQ(kloss_loss_set_input(l, "target", KLOSS_INT64, t_ok, 1, &s2), KLOSS_OK);
  // Result buffers of the wrong size or dtype.
  float two[2];
  expect_error(kloss_loss_forward(l, KLOSS_FLOAT32, two, 2), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"cross_entropy", "'output'", "holds 2", "has 1"});
  double d = 0;
  expect_error(kloss_loss_forward(l, KLOSS_FLOAT64, &d, 1), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'output'", "float64", "float32"});
  expect_error(kloss_loss_forward(l, 6, &d, 1), KLOSS_ERROR_INVALID_ARGUMENT, {"cross_entropy", "'dtype'", "6"});
  // A forward gives no gradients.
  ASSERT_EQ(kloss_loss_forward(l, KLOSS_FLOAT32, &out, 1), KLOSS_OK) << kloss_last_error();
  EXPECT_NEAR(out, std::log(3.0f), 1e-6f);
  expect_error(kloss_loss_get_grad(l, "input", KLOSS_FLOAT32, g, 6), KLOSS_ERROR_INVALID_STATE,
               {"cross_entropy", "no gradients", "kloss_loss_backward"});
  expect_error(kloss_loss_get_output(l, KLOSS_FLOAT32, two, 2), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"cross_entropy", "'output'", "holds 2"});
  // Backward: the upstream gradient must have the output's size and dtype.
  const float go[2] = {1, 1};
  expect_error(kloss_loss_backward(l, KLOSS_FLOAT32, go, 2), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"cross_entropy", "'grad_output'", "holds 2", "[]"});
  expect_error(kloss_loss_backward(l, KLOSS_FLOAT64, go, 1), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'grad_output'", "float64"});
  ASSERT_EQ(kloss_loss_backward(l, KLOSS_FLOAT32, go, 1), KLOSS_OK) << kloss_last_error();
  // Gradients: of a differentiable input only, into a buffer of its size.
  expect_error(kloss_loss_get_grad(l, "target", KLOSS_FLOAT32, g, 2), KLOSS_ERROR_NOT_IMPLEMENTED,
               {"cross_entropy", "'target'", "no gradient", "input"});
  expect_error(kloss_loss_get_grad(l, "input", KLOSS_FLOAT32, g, 5), KLOSS_ERROR_DIMENSION_MISMATCH,
               {"cross_entropy", "'grad'", "holds 5", "[2, 3]"});
  expect_error(kloss_loss_get_grad(l, "input", KLOSS_FLOAT64, g, 6), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'grad'", "float64"});
  ASSERT_EQ(kloss_loss_get_grad(l, "input", KLOSS_FLOAT32, g, 6), KLOSS_OK);
  EXPECT_NEAR(g[0], 1.0f / 6 - 0.5f, 1e-6f);
  // Clearing an input invalidates nothing already computed but the next run
  // needs it again.
  ASSERT_EQ(kloss_loss_clear_input(l, "target"), KLOSS_OK);
  expect_error(kloss_loss_backward(l, KLOSS_FLOAT32, nullptr, 0), KLOSS_ERROR_INVALID_ARGUMENT,
               {"cross_entropy", "'target'", "missing"});
}

// An optional differentiable input that was not given has no gradient.
TEST(CApiErrors, GradientOfAnAbsentOptionalInput) {
  Loss l("fused_linear_cross_entropy", KLOSS_FLOAT64);
  set_f64(l, "input", {1, 2}, {1, 2});
  set_f64(l, "weight", {1, 0, 0, 1, 1, 1}, {3, 2});
  const int64_t t = 1, n = 1;
  ASSERT_EQ(kloss_loss_set_input(l, "target", KLOSS_INT64, &t, 1, &n), KLOSS_OK);
  ASSERT_EQ(kloss_loss_backward(l, KLOSS_FLOAT64, nullptr, 0), KLOSS_OK) << kloss_last_error();
  double gb[3];
  expect_error(kloss_loss_get_grad(l, "bias", KLOSS_FLOAT64, gb, 3), KLOSS_ERROR_INVALID_ARGUMENT,
               {"fused_linear_cross_entropy", "'bias'", "not given"});
}

TEST(CApi, StatusNames) {
  // Each status is named by its constant's own spelling.
#define KLOSS_TEST_STATUS(s) std::pair<int, const char*>(s, #s)
  for (const auto& [status, name] :
       {KLOSS_TEST_STATUS(KLOSS_OK), KLOSS_TEST_STATUS(KLOSS_ERROR_INVALID_ARGUMENT),
        KLOSS_TEST_STATUS(KLOSS_ERROR_DIMENSION_MISMATCH), KLOSS_TEST_STATUS(KLOSS_ERROR_INDEX_OUT_OF_RANGE),
        KLOSS_TEST_STATUS(KLOSS_ERROR_NOT_IMPLEMENTED), KLOSS_TEST_STATUS(KLOSS_ERROR_MPI),
        KLOSS_TEST_STATUS(KLOSS_ERROR_HDF5), KLOSS_TEST_STATUS(KLOSS_ERROR_NOT_INITIALIZED),
        KLOSS_TEST_STATUS(KLOSS_ERROR_NULL_POINTER), KLOSS_TEST_STATUS(KLOSS_ERROR_INVALID_STATE),
        KLOSS_TEST_STATUS(KLOSS_ERROR_OUT_OF_MEMORY), KLOSS_TEST_STATUS(KLOSS_ERROR_INTERNAL)})
    EXPECT_STREQ(kloss_status_name(status), name);
#undef KLOSS_TEST_STATUS
  EXPECT_STREQ(kloss_status_name(12), "unknown status");
  EXPECT_STREQ(kloss_status_name(-1), "unknown status");
  // Initialising again when the program already did is a no-op success.
  EXPECT_EQ(kloss_is_initialized(), 1);
  EXPECT_EQ(kloss_initialize(), KLOSS_OK);
  EXPECT_EQ(kloss_finalize(), KLOSS_OK);  // not ours to finalise: left alone
  EXPECT_EQ(kloss_is_initialized(), 1);
}

// kloss_version() is the C++ library's version, a static string.
TEST(CApi, VersionIsTheLibrarys) {
  ASSERT_NE(kloss_version(), nullptr);
  EXPECT_STREQ(kloss_version(), kloss::version().c_str());
  EXPECT_STREQ(kloss_version(), KLOSS_VERSION_STRING);
  EXPECT_EQ(kloss_version(), kloss_version());
}

}  // namespace

// The registry through the C API: every op of kloss::ops() in its order, as
// JSON with its inputs and options (the Python package builds its op table
// from these).
TEST(CApi, RegistryListingMatchesTheRegistry) {
  const auto& ops = kloss::ops();
  ASSERT_EQ(kloss_op_count(), static_cast<int>(ops.size()));
  for (int i = 0; i < kloss_op_count(); ++i) {
    const char* json = kloss_op_json(i);
    ASSERT_NE(json, nullptr) << i;
    const std::string j(json);
    EXPECT_EQ(j.front(), '{');
    EXPECT_EQ(j.back(), '}');
    EXPECT_NE(j.find("\"name\": \"" + std::string(ops[i].name) + "\""), std::string::npos) << j;
    for (const auto& in : ops[i].inputs) EXPECT_NE(j.find("\"" + std::string(in) + "\""), std::string::npos) << j;
  }
  const std::string smooth = kloss_op_json(2);
  EXPECT_NE(smooth.find("{\"name\": \"beta\", \"type\": \"real\", \"default\": \"1.0\""), std::string::npos) << smooth;
  EXPECT_EQ(kloss_op_json(kloss_op_count()), nullptr);
  EXPECT_NE(std::string(kloss_last_error()).find("outside [0, "), std::string::npos);
  EXPECT_EQ(kloss_op_json(-1), nullptr);
}
