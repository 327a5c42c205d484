// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The golden-file reader and validator (include/kloss/golden.hpp): the
// balanced vocabulary split, the comparison rule, write-then-read round
// trips, hyperslab reads of vocabulary slices, and hand-broken files made
// with the HDF5 C API - each must give an Hdf5Error (or a failed case)
// naming the file, the case and the item, never a crash, while the other
// cases of the file still run.
#include <kloss/config.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <kloss/golden.hpp>
#include <kloss/registry.hpp>
#include <limits>
#include <variant>

#include "test_utils.hpp"

using namespace kloss;
using namespace kloss::golden;

namespace {

// A fresh file name in the temporary directory, removed at the end.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& tag) {
    path = "/tmp/kloss_golden_test_" + std::to_string(::getpid()) + "_" + tag + ".h5";
  }
  ~TempFile() { std::remove(path.c_str()); }
};

Expected exp_of(const Shape& s, std::vector<double> v) { return Expected{s, std::move(v)}; }

// A case with nothing but its name, op and dtype.
CaseToWrite case_of(std::string name, std::string op, std::string dtype) {
  CaseToWrite c;
  c.name = std::move(name);
  c.op = std::move(op);
  c.dtype = std::move(dtype);
  return c;
}

// A correct mse_loss case (reduction sum) with hand-computed expectations:
// input [2,2] = {1,2,3,4}, target {0,2,5,4}: loss = 1 + 0 + 4 + 0 = 5;
// grad_input = 2*(x-t)*go = {2,0,-4,0} with go = 1, grad_target = -that.
CaseToWrite mse_case(const std::string& name) {
  CaseToWrite c = case_of(name, "mse_loss", "float64");
  c.attributes["reduction"] = std::string("sum");
  c.float_inputs["input"] = exp_of(Shape{2, 2}, {1, 2, 3, 4});
  c.float_inputs["target"] = exp_of(Shape{2, 2}, {0, 2, 5, 4});
  c.float_inputs["grad_output"] = exp_of(Shape{}, {1});
  c.output = exp_of(Shape{}, {5});
  c.grads["input"] = exp_of(Shape{2, 2}, {2, 0, -4, 0});
  c.grads["target"] = exp_of(Shape{2, 2}, {-2, 0, 4, 0});
  return c;
}

// --- raw HDF5 helpers for hand-broken files ------------------------------------
hid_t h5_create(const std::string& path) { return H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT); }

// A scalar attribute of file type `ftype`, written from `data` of memory type `mtype`.
void h5_attr(hid_t obj, const char* name, hid_t ftype, hid_t mtype, const void* data) {
  Handle s(H5Screate(H5S_SCALAR));
  Handle a(H5Acreate2(obj, name, ftype, s.get(), H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_TRUE(a.valid());
  ASSERT_GE(H5Awrite(a.get(), mtype, data), 0);
}

void h5_attr_vlen(hid_t obj, const char* name, const char* value, H5T_cset_t cset = H5T_CSET_UTF8) {
  Handle t(H5Tcopy(H5T_C_S1));
  ASSERT_GE(H5Tset_size(t.get(), H5T_VARIABLE), 0);
  ASSERT_GE(H5Tset_cset(t.get(), cset), 0);
  h5_attr(obj, name, t.get(), t.get(), &value);
}

void h5_attr_fixed(hid_t obj, const char* name, const std::string& bytes, H5T_str_t pad,
                   H5T_cset_t cset = H5T_CSET_ASCII) {
  Handle t(H5Tcopy(H5T_C_S1));
  ASSERT_GE(H5Tset_size(t.get(), bytes.size()), 0);
  ASSERT_GE(H5Tset_strpad(t.get(), pad), 0);
  ASSERT_GE(H5Tset_cset(t.get(), cset), 0);
  h5_attr(obj, name, t.get(), t.get(), bytes.data());
}

void h5_attr_num(hid_t obj, const char* name, double v) { h5_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v); }

void h5_attr_int(hid_t obj, const char* name, std::int64_t v) {
  h5_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

// A dataset of file type `ftype` over dataspace `space` (creation properties
// `dcpl`), written from `data` of memory type `mtype` unless that is null.
void h5_new_dset(hid_t loc, const char* name, hid_t ftype, hid_t space, const void* data = nullptr,
                 hid_t mtype = H5T_NATIVE_DOUBLE, hid_t dcpl = H5P_DEFAULT) {
  Handle d(H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  ASSERT_TRUE(d.valid());
  if (data) {
    ASSERT_GE(H5Dwrite(d.get(), mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
  }
}

// A dataset of shape `dims` (scalar if empty) holding `v` (nothing if empty).
template <class T>
void h5_dset_of(hid_t loc, const char* name, const std::vector<hsize_t>& dims, const std::vector<T>& v, hid_t ftype,
                hid_t mtype) {
  Handle s(dims.empty() ? H5Screate(H5S_SCALAR)
                        : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  h5_new_dset(loc, name, ftype, s.get(), v.empty() ? nullptr : v.data(), mtype);
}

void h5_dset(hid_t loc, const char* name, const std::vector<hsize_t>& dims, const std::vector<double>& v) {
  h5_dset_of(loc, name, dims, v, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE);
}

void h5_dset_int(hid_t loc, const char* name, const std::vector<hsize_t>& dims, const std::vector<std::int64_t>& v) {
  h5_dset_of(loc, name, dims, v, H5T_STD_I64LE, H5T_NATIVE_INT64);
}

void h5_delete(hid_t loc, const char* name) { ASSERT_GE(H5Ldelete(loc, name, H5P_DEFAULT), 0); }
void h5_delete_attr(hid_t loc, const char* name) { ASSERT_GE(H5Adelete(loc, name), 0); }

// Writes the correct mse case "c" with write_golden_file, then lets
// `breaker` damage the case group (opened read-write).
void write_broken(const std::string& path, const std::function<void(hid_t file, hid_t kase)>& breaker) {
  write_golden_file(path, {mse_case("c")});
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_TRUE(f.valid());
  Handle g(H5Gopen2(f.get(), "/cases/c", H5P_DEFAULT));
  ASSERT_TRUE(g.valid());
  breaker(f.get(), g.get());
}

// write_broken with the item `name` of the case (a group or dataset) deleted,
// then made again by `remake` (given the case group).
void write_remade(const std::string& path, const char* name, const std::function<void(hid_t kase)>& remake) {
  write_broken(path, [&](hid_t, hid_t g) {
    h5_delete(g, name);
    remake(g);
  });
}

// write_broken with the case's attribute `name` written again as `value`
// (an int64, a float64 or a variable-length string).
void write_reattributed(const std::string& path, const char* name,
                        const std::variant<std::int64_t, double, const char*>& value) {
  write_broken(path, [&](hid_t, hid_t g) {
    h5_delete_attr(g, name);
    if (const auto* i = std::get_if<std::int64_t>(&value))
      h5_attr_int(g, name, *i);
    else if (const auto* d = std::get_if<double>(&value))
      h5_attr_num(g, name, *d);
    else
      h5_attr_vlen(g, name, std::get<const char*>(value));
  });
}

// Reads case "c" of `path`: expects ErrType whose message names the file,
// the case and contains `what`.
template <class ErrType>
void expect_read_error(const std::string& path, const std::string& what) {
  try {
    GoldenFile f(path);
    (void)f.read_case("c");
    ADD_FAILURE() << "expected an error containing '" << what << "'";
  } catch (const ErrType& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find("case 'c'"), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
  }
}

}  // namespace

// --- vocab split ------------------------------------------------------------------
TEST(GoldenVocabSplit, FirstRemainderRanksOwnOneMore) {
  // V = 10 over 3: 4, 3, 3 starting 0, 4, 7.
  EXPECT_EQ(vocab_split(10, 0, 3).begin, 0);
  EXPECT_EQ(vocab_split(10, 0, 3).count, 4);
  EXPECT_EQ(vocab_split(10, 1, 3).begin, 4);
  EXPECT_EQ(vocab_split(10, 1, 3).count, 3);
  EXPECT_EQ(vocab_split(10, 2, 3).begin, 7);
  EXPECT_EQ(vocab_split(10, 2, 3).count, 3);
  // V = 8 over 3: 3, 3, 2 (a naive r*V/P would start rank 2 at 5).
  EXPECT_EQ(vocab_split(8, 2, 3).begin, 6);
  EXPECT_EQ(vocab_split(8, 2, 3).count, 2);
  // Fewer rows than ranks: the last ranks own nothing.
  EXPECT_EQ(vocab_split(2, 2, 3).begin, 2);
  EXPECT_EQ(vocab_split(2, 2, 3).count, 0);
  EXPECT_EQ(vocab_split(10, 1, 3).total, 10);
}

TEST(GoldenVocabSplit, CoversTheVocabularyContiguously) {
  for (std::int64_t v : {0, 1, 2, 5, 13, 41, 1000, 128257})
    for (int p = 1; p <= 9; ++p) {
      std::int64_t next = 0;
      for (int r = 0; r < p; ++r) {
        const auto s = vocab_split(v, r, p);
        EXPECT_EQ(s.begin, next) << v << " " << p << " " << r;
        EXPECT_TRUE(s.count == v / p || s.count == v / p + 1);
        EXPECT_EQ(s.count == v / p + 1, r < v % p);
        next = s.begin + s.count;
      }
      EXPECT_EQ(next, v);
    }
}

TEST(GoldenVocabSplit, RejectsBadRanks) {
  EXPECT_KLOSS_THROW(vocab_split(10, 3, 3), InvalidArgument, "argument 'rank' must be in [0, 3), got 3");
  EXPECT_KLOSS_THROW(vocab_split(10, -1, 3), InvalidArgument, "argument 'rank' must be in [0, 3), got -1");
  EXPECT_KLOSS_THROW(vocab_split(10, 0, 0), InvalidArgument, "argument 'size' must be positive, got 0");
  EXPECT_KLOSS_THROW(vocab_split(-1, 0, 1), InvalidArgument, "argument 'total' must be non-negative, got -1");
}

TEST(GoldenVocabSplit, SchemaSelectsTheVocabularyParallelOps) {
  EXPECT_TRUE(vocab_parallel_allowed("cross_entropy", true));
  EXPECT_FALSE(vocab_parallel_allowed("cross_entropy", false));
  EXPECT_TRUE(vocab_parallel_allowed("fused_linear_cross_entropy", true));
  EXPECT_FALSE(vocab_parallel_allowed("fused_linear_cross_entropy", false));  // probabilities: kloss's extension
  EXPECT_TRUE(vocab_parallel_allowed("embedding", true));
  EXPECT_FALSE(vocab_parallel_allowed("embedding_bag", true));
  EXPECT_FALSE(vocab_parallel_allowed("nll_loss", true));
  EXPECT_FALSE(vocab_parallel_allowed("mse_loss", false));
}

// --- comparison ---------------------------------------------------------------------
TEST(GoldenCompare, ToleranceIsAtolPlusRtolTimesExpected) {
  const Expected e = exp_of(Shape{3}, {1.0, -100.0, 0.0});
  // tol = 0.25 + 0.5*|e| = 0.75, 50.25, 0.25 (all exact in binary): the
  // boundary itself passes.
  auto ok = compare("output", Shape{3}, {1.75, -150.25, -0.25}, e, 0.5, 0.25);
  EXPECT_TRUE(ok.ok) << ok.reason;
  EXPECT_EQ(ok.mismatches, 0);
  EXPECT_EQ(ok.max_abs_err, 50.25);
  EXPECT_EQ(ok.max_rel_err, 0.75);  // 0.75/1 beats 50.25/100; expected 0 is skipped
  auto bad = compare("grad_input", Shape{3}, {1.875, -100.0, -0.25}, e, 0.5, 0.25);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.mismatches, 1);
  EXPECT_EQ(
      bad.reason,
      "grad_input: 1 of 3 element(s) out of tolerance; worst at [0]: got 1.875, expected 1 (|diff| 0.875 > 0.75)");
}

TEST(GoldenCompare, NaNOnlyMatchesNaNAndInfOnlyTheSameInf) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Expected e = exp_of(Shape{2, 2}, {nan, inf, -inf, 1.0});
  EXPECT_TRUE(compare("output", Shape{2, 2}, {nan, inf, -inf, 1.0}, e, 0, 0).ok);
  auto a = compare("output", Shape{2, 2}, {0.0, inf, -inf, 1.0}, e, 1, 1);
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.reason.find("worst at [0, 0]: got 0, expected nan"), std::string::npos) << a.reason;
  auto b = compare("output", Shape{2, 2}, {nan, -inf, -inf, 1.0}, e, 1, 1);
  EXPECT_FALSE(b.ok);
  EXPECT_NE(b.reason.find("[0, 1]"), std::string::npos) << b.reason;
  auto c = compare("output", Shape{2, 2}, {nan, inf, -inf, nan}, e, 1, 1);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.reason.find("[1, 1]: got nan, expected 1"), std::string::npos) << c.reason;
  // A finite got never matches an infinite expectation, however loose.
  EXPECT_FALSE(compare("output", Shape{1}, {1e308}, exp_of(Shape{1}, {inf}), 1e9, 1e9).ok);
}

TEST(GoldenCompare, EveryPairOfNonFiniteAndFiniteValues) {
  // Each (got, expected) pair over {NaN, +inf, -inf, 1}: passes only for the
  // same kind (and, for finite values, within tolerance), however loose the
  // tolerance; the worst mismatch named is the non-finite one; the error
  // statistics see only finite pairs.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const double vals[] = {nan, inf, -inf, 1.0};
  auto kind = [](double v) { return std::isnan(v) ? 0 : (v == std::numeric_limits<double>::infinity() ? 1 : (std::isinf(v) ? 2 : 3)); };
  for (double e : vals)
    for (double g : vals) {
      const auto r = compare("output", Shape{1}, {g}, exp_of(Shape{1}, {e}), 1e6, 1e6);
      EXPECT_EQ(r.ok, kind(g) == kind(e)) << "got " << g << ", expected " << e;
      EXPECT_EQ(r.max_abs_err, 0.0) << "got " << g << ", expected " << e;
    }
  // -0 and +0 are the same value; a finite value next to a NaN mismatch is
  // still measured.
  EXPECT_TRUE(compare("output", Shape{1}, {-0.0}, exp_of(Shape{1}, {0.0}), 0, 0).ok);
  auto m = compare("output", Shape{3}, {1.5, nan, 2.0}, exp_of(Shape{3}, {1.0, 3.0, 2.0}), 1, 1);
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.mismatches, 1);
  EXPECT_EQ(m.max_abs_err, 0.5);
  EXPECT_NE(m.reason.find("worst at [1]: got nan, expected 3"), std::string::npos) << m.reason;
}

TEST(GoldenCompare, ShapeDifferenceIsAMismatch) {
  auto r = compare("output", Shape{2, 1}, {1, 2}, exp_of(Shape{2}, {1, 2}), 0, 0);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.reason, "output: shape [2, 1], expected [2]");
  EXPECT_FALSE(compare("output", Shape{}, {1}, exp_of(Shape{1}, {1}), 0, 0).ok);
}

TEST(GoldenCompare, MissingGradientIsAFailure) {
  Case c;
  c.name = "x";
  c.call.op = "some_op";
  c.call.dtype = rt::DType::float64;
  c.output = exp_of(Shape{}, {1});
  c.grads["input"] = exp_of(Shape{1}, {2});
  c.grads["target"] = exp_of(Shape{1}, {3});
  rt::Result r;
  r.output = rt::Buffer::from_doubles(rt::DType::float64, Shape{}, {1});
  r.grads["input"] = rt::Buffer::from_doubles(rt::DType::float64, Shape{1}, {2});
  auto rep = check_result(c, r);
  EXPECT_FALSE(rep.passed);
  EXPECT_EQ(rep.reason, "grad_target: the op returned no gradient for 'target'");
  r.grads["target"] = rt::Buffer::from_doubles(rt::DType::float64, Shape{1}, {3});
  EXPECT_TRUE(check_result(c, r).passed);
}

// --- round trip ---------------------------------------------------------------------
TEST(GoldenRoundTrip, WrittenCaseReadsBackAndPasses) {
  TempFile tf("roundtrip");
  CaseToWrite c = mse_case("mse_sum");
  c.index_dtype = "int32";
  c.attributes["an_int"] = std::int64_t(-3);
  c.attributes["a_real"] = 0.25;
  c.attributes["a_string"] = std::string("h\xc3\xa9");
  c.rtol = 1e-9;
  c.atol = 2e-9;
  CaseToWrite d = mse_case("empty");
  d.float_inputs["input"] = exp_of(Shape{0, 3}, {});
  d.float_inputs["target"] = exp_of(Shape{0, 3}, {});
  d.attributes["reduction"] = std::string("none");
  d.float_inputs["grad_output"] = exp_of(Shape{0, 3}, {});
  d.output = exp_of(Shape{0, 3}, {});
  d.grads["input"] = exp_of(Shape{0, 3}, {});
  d.grads["target"] = exp_of(Shape{0, 3}, {});
  write_golden_file(tf.path, {c, d});

  GoldenFile f(tf.path);
  ASSERT_EQ(f.case_names(), (std::vector<std::string>{"empty", "mse_sum"}));
  const Case r = f.read_case("mse_sum");
  EXPECT_EQ(r.name, "mse_sum");
  EXPECT_EQ(r.file, tf.path);
  EXPECT_EQ(r.call.op, "mse_loss");
  EXPECT_EQ(r.call.dtype, rt::DType::float64);
  EXPECT_EQ(r.call.index_dtype, rt::DType::int32);
  EXPECT_EQ(r.rtol, 1e-9);
  EXPECT_EQ(r.atol, 2e-9);
  const auto& o = r.call.options.values();
  ASSERT_EQ(o.size(), 4u);  // reduction + 3; op, dtype, index_dtype, rtol, atol are not options
  EXPECT_EQ(std::get<std::string>(o.at("reduction")), "sum");
  EXPECT_EQ(std::get<std::int64_t>(o.at("an_int")), -3);
  EXPECT_EQ(std::get<double>(o.at("a_real")), 0.25);
  EXPECT_EQ(std::get<std::string>(o.at("a_string")), "h\xc3\xa9");
  ASSERT_EQ(r.call.inputs.size(), 2u);
  EXPECT_EQ(r.call.inputs.at("input").shape(), (Shape{2, 2}));
  EXPECT_EQ(r.call.inputs.at("target").to_doubles(), (std::vector<double>{0, 2, 5, 4}));
  ASSERT_TRUE(r.call.grad_output.has_value());
  EXPECT_EQ(r.call.grad_output->shape(), Shape{});
  EXPECT_EQ(r.output.shape, Shape{});
  EXPECT_EQ(r.output.values, std::vector<double>{5});
  EXPECT_EQ(r.grads.at("input").values, (std::vector<double>{2, 0, -4, 0}));
  EXPECT_FALSE(r.vocab.has_value());
  EXPECT_EQ(f.summary("mse_sum").index_dtype, "int32");
  EXPECT_EQ(f.summary("empty").index_dtype, "int64");

  // mse_loss runs and matches (the options it does not know make it fail,
  // so run the case without them).
  Case runnable = f.read_case("empty");
  auto rep = run_case(runnable);
  EXPECT_TRUE(rep.passed) << rep.reason;
  auto rep2 = run_case(r);
  EXPECT_FALSE(rep2.passed);
  EXPECT_NE(rep2.reason.find("option 'a_real' is not supported"), std::string::npos) << rep2.reason;
}

TEST(GoldenRoundTrip, InputsAreRoundedToTheCaseDtype) {
  TempFile tf("rounding");
  CaseToWrite c = mse_case("c");
  c.dtype = "bfloat16";
  c.float_inputs["input"] = exp_of(Shape{2, 2}, {1.00390625, 2, 3, 4});  // 1 + 2^-8: not a bfloat16
  write_golden_file(tf.path, {c});
  GoldenFile f(tf.path);
  const Case r = f.read_case("c");
  EXPECT_EQ(r.call.inputs.at("input").dtype(), rt::DType::bfloat16);
  EXPECT_EQ(r.call.inputs.at("input").to_doubles()[0], 1.0);
  EXPECT_EQ(r.call.grad_output->dtype(), rt::DType::bfloat16);
}

TEST(GoldenRoundTrip, IntegerInputsGoToTheIndexDtype) {
  TempFile tf("ints");
  CaseToWrite c = case_of("c", "nll_loss", "float32");
  c.index_dtype = "int32";
  c.float_inputs["input"] = exp_of(Shape{2, 3}, {0, 0, 0, 0, 0, 0});
  c.int_inputs["target"] = {Shape{2}, {2, 0}};
  c.output = exp_of(Shape{}, {0});
  write_golden_file(tf.path, {c});
  {
    GoldenFile f(tf.path);
    const Case r = f.read_case("c");
    EXPECT_EQ(r.call.inputs.at("target").dtype(), rt::DType::int32);
    EXPECT_EQ(r.call.inputs.at("target").to_int64(), (std::vector<std::int64_t>{2, 0}));
    EXPECT_EQ(r.call.inputs.at("input").dtype(), rt::DType::float32);
    EXPECT_FALSE(r.call.grad_output.has_value());  // forward-only case
  }

  // An index that does not fit the index dtype is an error naming the item.
  c.int_inputs["target"] = {Shape{2}, {std::int64_t(1) << 40, 0}};
  write_golden_file(tf.path, {c});
  expect_read_error<Hdf5Error>(tf.path, "dataset 'inputs/target': cannot convert to int32");
}

TEST(GoldenRoundTrip, InMemoryImageReadsLikeTheFile) {
  TempFile tf("image");
  write_golden_file(tf.path, {mse_case("a"), mse_case("b")});
  std::ifstream is(tf.path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(is)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 100u);
  GoldenFile f = GoldenFile::from_image(bytes.data(), bytes.size(), "image.h5");
  EXPECT_EQ(f.path(), "image.h5");
  ASSERT_EQ(f.case_names().size(), 2u);
  EXPECT_TRUE(run_case(f.read_case("b")).passed);
  std::vector<char> junk(4096, 'x');
  EXPECT_KLOSS_THROW(GoldenFile::from_image(junk.data(), junk.size(), "junk.h5"), Hdf5Error,
                     "kloss::golden: junk.h5: file: is not an HDF5 file");
  EXPECT_KLOSS_THROW(GoldenFile::from_image(nullptr, 0, "empty.h5"), Hdf5Error, "empty.h5: file: is empty");
  // A truncated image.
  EXPECT_THROW(GoldenFile::from_image(bytes.data(), bytes.size() / 2, "half.h5").read_case("b"), Hdf5Error);
}

// --- string attributes in every spelling the schema allows ---------------------------
TEST(GoldenStrings, FixedAndVariableAsciiAndUtf8AllRead) {
  TempFile tf("strings");
  write_broken(tf.path, [](hid_t, hid_t g) {
    h5_delete_attr(g, "op");
    h5_delete_attr(g, "dtype");
    h5_delete_attr(g, "reduction");
    h5_attr_fixed(g, "op", std::string("mse_loss\0\0\0", 11), H5T_STR_NULLPAD);
    h5_attr_fixed(g, "dtype", std::string("float64\0", 8), H5T_STR_NULLTERM, H5T_CSET_UTF8);
    h5_attr_vlen(g, "reduction", "sum", H5T_CSET_ASCII);
    h5_attr_fixed(g, "padded", "abc   ", H5T_STR_SPACEPAD);
    h5_attr_vlen(g, "utf8", "\xce\xbb=1");
  });
  GoldenFile f(tf.path);
  const Case c = f.read_case("c");
  EXPECT_EQ(c.call.op, "mse_loss");
  EXPECT_EQ(c.call.dtype, rt::DType::float64);
  const auto& o = c.call.options.values();
  EXPECT_EQ(std::get<std::string>(o.at("reduction")), "sum");
  EXPECT_EQ(std::get<std::string>(o.at("padded")), "abc");
  EXPECT_EQ(std::get<std::string>(o.at("utf8")), "\xce\xbb=1");
}

TEST(GoldenStrings, BooleanEnumReadsAsInt64) {
  // h5py stores numpy booleans as an enum {FALSE, TRUE} over int8.
  TempFile tf("enum");
  write_broken(tf.path, [](hid_t, hid_t g) {
    Handle t(H5Tenum_create(H5T_NATIVE_INT8));
    signed char f = 0, tr = 1;
    ASSERT_GE(H5Tenum_insert(t.get(), "FALSE", &f), 0);
    ASSERT_GE(H5Tenum_insert(t.get(), "TRUE", &tr), 0);
    Handle s(H5Screate(H5S_SCALAR));
    Handle a(H5Acreate2(g, "log_target", t.get(), s.get(), H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Awrite(a.get(), t.get(), &tr), 0);
  });
  GoldenFile f(tf.path);
  EXPECT_EQ(std::get<std::int64_t>(f.read_case("c").call.options.values().at("log_target")), 1);
}

// --- hand-broken files ----------------------------------------------------------------
TEST(GoldenBroken, NotHdf5AtAllOrMissing) {
  TempFile tf("text");
  { std::ofstream(tf.path) << "this is not HDF5\n"; }
  EXPECT_KLOSS_THROW(GoldenFile f(tf.path), Hdf5Error, tf.path + ": file: is not an HDF5 file");
  EXPECT_KLOSS_THROW(GoldenFile f("/nonexistent/x.h5"), Hdf5Error, "/nonexistent/x.h5: file: cannot be opened");
  auto rep = validate_file(tf.path);
  EXPECT_NE(rep.error.find("is not an HDF5 file"), std::string::npos);
  EXPECT_TRUE(rep.cases.empty());
}

TEST(GoldenBroken, SchemaAttributeMissingOrUnknown) {
  TempFile tf("schema");
  write_golden_file(tf.path, {mse_case("c")});
  {
    Handle f(H5Fopen(tf.path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    h5_delete_attr(f.get(), "schema");
    h5_attr_vlen(f.get(), "schema", "kloss-golden/2");
  }
  EXPECT_KLOSS_THROW(
      GoldenFile f(tf.path), Hdf5Error,
      "attribute '/schema': unknown schema version 'kloss-golden/2'; this reader knows 'kloss-golden/1'");
  {
    Handle f(H5Fopen(tf.path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    h5_delete_attr(f.get(), "schema");
  }
  EXPECT_KLOSS_THROW(GoldenFile f(tf.path), Hdf5Error, "attribute '/schema': missing");
  {
    Handle f(H5Fopen(tf.path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    h5_attr_num(f.get(), "schema", 1.0);
  }
  EXPECT_KLOSS_THROW(GoldenFile f(tf.path), Hdf5Error, "attribute 'schema': must be a string");
}

TEST(GoldenBroken, CasesGroupMissingOrNotAGroup) {
  TempFile tf("cases");
  {
    Handle f(h5_create(tf.path));
    h5_attr_vlen(f.get(), "schema", "kloss-golden/1");
  }
  EXPECT_KLOSS_THROW(GoldenFile f(tf.path), Hdf5Error, "group '/cases': missing group");
  {
    Handle f(H5Fopen(tf.path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    h5_dset(f.get(), "cases", {2}, {1, 2});
  }
  EXPECT_KLOSS_THROW(GoldenFile f(tf.path), Hdf5Error, "group '/cases': is not a group");
}

TEST(GoldenBroken, MissingAttributes) {
  for (const char* a : {"op", "dtype", "rtol", "atol"}) {
    TempFile tf(std::string("noattr_") + a);
    write_broken(tf.path, [&](hid_t, hid_t g) { h5_delete_attr(g, a); });
    expect_read_error<Hdf5Error>(tf.path, std::string("attribute '") + a + "': missing");
  }
}

TEST(GoldenBroken, AttributesOfTheWrongType) {
  TempFile tf("attrtype");
  write_reattributed(tf.path, "rtol", "0.1");
  expect_read_error<Hdf5Error>(tf.path, "attribute 'rtol': must be a real number");
  write_reattributed(tf.path, "op", std::int64_t{3});
  expect_read_error<Hdf5Error>(tf.path, "attribute 'op': must be a string");
  write_reattributed(tf.path, "atol", -1.0);
  expect_read_error<Hdf5Error>(tf.path, "attribute 'atol': must be finite and >= 0");
  write_broken(tf.path, [](hid_t, hid_t g) {
    // An array attribute where a scalar is expected.
    hsize_t n = 2;
    Handle s(H5Screate_simple(1, &n, nullptr));
    double v[2] = {1, 2};
    Handle a(H5Acreate2(g, "margin", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Awrite(a.get(), H5T_NATIVE_DOUBLE, v), 0);
  });
  expect_read_error<Hdf5Error>(tf.path, "attribute 'margin': must be a scalar, got 2 elements");
  write_broken(tf.path, [](hid_t, hid_t g) {
    Handle t(H5Tcreate(H5T_COMPOUND, 8));
    ASSERT_GE(H5Tinsert(t.get(), "x", 0, H5T_NATIVE_DOUBLE), 0);
    const double v = 1;
    h5_attr(g, "weird", t.get(), t.get(), &v);
  });
  expect_read_error<Hdf5Error>(tf.path, "attribute 'weird': has type class compound");
  write_broken(tf.path, [](hid_t, hid_t g) {
    const std::uint64_t v = 1;
    h5_attr(g, "big", H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
  });
  expect_read_error<Hdf5Error>(tf.path, "attribute 'big': integer type does not fit int64");
}

TEST(GoldenBroken, MissingGroupsAndDatasets) {
  TempFile tf("missing");
  write_broken(tf.path, [](hid_t, hid_t g) { h5_delete(g, "inputs"); });
  expect_read_error<Hdf5Error>(tf.path, "group 'inputs': missing group");
  write_broken(tf.path, [](hid_t, hid_t g) { h5_delete(g, "expected"); });
  expect_read_error<Hdf5Error>(tf.path, "group 'expected': missing group");
  write_broken(tf.path, [](hid_t, hid_t g) { h5_delete(g, "expected/output"); });
  expect_read_error<Hdf5Error>(tf.path, "dataset 'expected/output': missing dataset");
  write_broken(tf.path, [](hid_t, hid_t g) { h5_delete(g, "inputs/grad_output"); });
  expect_read_error<Hdf5Error>(tf.path, "dataset 'inputs/grad_output': missing, but the case has expected gradients");
  write_broken(tf.path, [](hid_t, hid_t g) { h5_delete(g, "inputs/target"); });
  expect_read_error<Hdf5Error>(tf.path, "dataset 'expected/grad_target': gradient of 'target', which is not among");
  write_broken(tf.path, [](hid_t, hid_t g) {
    ASSERT_GE(H5Lcreate_soft("/nowhere", g, "inputs/weight", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  expect_read_error<Hdf5Error>(tf.path, "dataset 'inputs/weight': cannot open (broken link?)");
  write_broken(tf.path, [](hid_t, hid_t g) {
    Handle sub(H5Gcreate2(g, "inputs/weight", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  });
  expect_read_error<Hdf5Error>(tf.path, "dataset 'inputs/weight': is not a dataset");
  write_remade(tf.path, "inputs", [](hid_t g) { h5_dset(g, "inputs", {1}, {1}); });
  expect_read_error<Hdf5Error>(tf.path, "group 'inputs': is not a group");
}

TEST(GoldenBroken, DatasetsOfTheWrongTypeClass) {
  TempFile tf("dtypeclass");
  write_remade(tf.path, "inputs/input", [](hid_t g) { h5_dset_int(g, "inputs/input", {2, 2}, {1, 2, 3, 4}); });
  expect_read_error<Hdf5Error>(tf.path, "dataset 'inputs/input': has type class integer; expected float64");
  write_remade(tf.path, "expected/output", [](hid_t g) {
    Handle t(H5Tcopy(H5T_C_S1));
    ASSERT_GE(H5Tset_size(t.get(), 4), 0);
    Handle s(H5Screate(H5S_SCALAR));
    h5_new_dset(g, "expected/output", t.get(), s.get());
  });
  expect_read_error<Hdf5Error>(tf.path, "dataset 'expected/output': has type class string; expected float64");
  // An embedding's indices must be integers.
  CaseToWrite c = case_of("c", "embedding", "float32");
  c.float_inputs["input"] = exp_of(Shape{2}, {0, 1});
  c.float_inputs["weight"] = exp_of(Shape{2, 1}, {5, 6});
  c.output = exp_of(Shape{2, 1}, {5, 6});
  write_golden_file(tf.path, {c});
  expect_read_error<Hdf5Error>(tf.path, "dataset 'inputs/input': has type class float; expected int64");
  write_remade(tf.path, "inputs/input", [](hid_t g) {
    Handle s(H5Screate(H5S_NULL));
    h5_new_dset(g, "inputs/input", H5T_IEEE_F64LE, s.get());
  });
  expect_read_error<Hdf5Error>(tf.path, "dataset 'inputs/input': has an empty (null) dataspace");
}

TEST(GoldenBroken, WrongRanksAndShapes) {
  TempFile tf("shapes");
  const struct {
    const char* name;  // the dataset written again, as float64
    std::vector<hsize_t> dims;
    std::vector<double> values;
    const char* what;
  } wrong[] = {
      {"inputs/input", std::vector<hsize_t>(9, 1), {1}, "dataset 'inputs/input': rank 9 exceeds kloss's maximum 8"},
      {"expected/grad_input",
       {4},
       {2, 0, -4, 0},
       "dataset 'expected/grad_input': shape [4] differs from inputs/input's [2, 2]"},
      {"expected/output", {1}, {5}, "dataset 'expected/output': a reduced output (reduction 'sum') must be a scalar"},
      {"inputs/grad_output", {1}, {1}, "dataset 'inputs/grad_output': shape [1] differs from expected/output's []"}};
  for (const auto& w : wrong) {
    write_remade(tf.path, w.name, [&](hid_t g) { h5_dset(g, w.name, w.dims, w.values); });
    expect_read_error<Hdf5Error>(tf.path, w.what);
  }
}

TEST(GoldenBroken, HugeShapesAreRefusedBeforeAllocating) {
  TempFile tf("huge");
  write_remade(tf.path, "inputs/input", [](hid_t g) {
    // A chunked dataset of 2^50 elements that stores nothing: reading it
    // whole would need 8 PiB.
    hsize_t dims[2] = {hsize_t(1) << 25, hsize_t(1) << 25}, chunk[2] = {1, 1};
    Handle s(H5Screate_simple(2, dims, nullptr));
    Handle p(H5Pcreate(H5P_DATASET_CREATE));
    ASSERT_GE(H5Pset_chunk(p.get(), 2, chunk), 0);
    h5_new_dset(g, "inputs/input", H5T_IEEE_F64LE, s.get(), nullptr, H5T_NATIVE_DOUBLE, p.get());
  });
  expect_read_error<Hdf5Error>(tf.path, "dataset 'inputs/input': more than 268435456 elements");
  ReadLimits small;
  small.max_elements = 3;
  write_golden_file(tf.path, {mse_case("c")});
  EXPECT_KLOSS_THROW(GoldenFile(tf.path, small).read_case("c"), Hdf5Error,
                     "dataset 'inputs/input': more than 3 elements");
  EXPECT_NO_THROW(GoldenFile(tf.path).read_case("c"));
}

TEST(GoldenBroken, UnimplementedDtypeOpAndOptionFailWithAReason) {
  TempFile tf("unimpl");
  write_reattributed(tf.path, "dtype", "float8");
  expect_read_error<NotImplemented>(tf.path, "attribute 'dtype': 'float8' is not a floating dtype kloss implements");
  write_broken(tf.path, [](hid_t, hid_t g) { h5_attr_vlen(g, "index_dtype", "uint8"); });
  expect_read_error<NotImplemented>(tf.path, "attribute 'index_dtype': 'uint8' is not an index dtype");

  CaseToWrite unknown_op = mse_case("unknown_op");
  unknown_op.op = "frobnicate_loss";
  CaseToWrite unknown_option = mse_case("unknown_option");
  unknown_option.attributes["z_loss"] = 1e-4;
  CaseToWrite wrong_value = mse_case("wrong_value");
  wrong_value.output.values[0] = 5.5;
  CaseToWrite bad_reduction = mse_case("bad_reduction");
  bad_reduction.attributes["reduction"] = std::string("median");
  write_golden_file(tf.path, {mse_case("good"), unknown_op, unknown_option, wrong_value, bad_reduction});
  auto rep = validate_file(tf.path);
  ASSERT_TRUE(rep.error.empty()) << rep.error;
  ASSERT_EQ(rep.cases.size(), 5u);
  std::map<std::string, CaseReport> by;
  for (const auto& c : rep.cases) by[c.name] = c;
  EXPECT_TRUE(by["good"].passed) << by["good"].reason;
  EXPECT_FALSE(by["unknown_op"].passed);
  EXPECT_EQ(by["unknown_op"].op, "frobnicate_loss");
  EXPECT_NE(by["unknown_op"].reason.find("kloss::frobnicate_loss: no such op"), std::string::npos);
  EXPECT_FALSE(by["unknown_option"].passed);
  EXPECT_NE(by["unknown_option"].reason.find("option 'z_loss' is not supported"), std::string::npos);
  EXPECT_FALSE(by["wrong_value"].passed);
  EXPECT_NE(
      by["wrong_value"].reason.find("output: 1 of 1 element(s) out of tolerance; worst at []: got 5, expected 5.5"),
      std::string::npos)
      << by["wrong_value"].reason;
  EXPECT_NEAR(by["wrong_value"].max_abs_err, 0.5, 1e-15);
  EXPECT_FALSE(by["bad_reduction"].passed);
  EXPECT_NE(by["bad_reduction"].reason.find("'median'"), std::string::npos) << by["bad_reduction"].reason;
}

TEST(GoldenBroken, OtherCasesOfTheFileStillRun) {
  TempFile tf("mixed");
  write_golden_file(tf.path, {mse_case("a_good"), mse_case("b_broken"), mse_case("c_good")});
  {
    Handle f(H5Fopen(tf.path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    h5_delete(f.get(), "/cases/b_broken/expected/output");
  }
  auto rep = validate_file(tf.path);
  ASSERT_EQ(rep.cases.size(), 3u);
  EXPECT_TRUE(rep.cases[0].passed);
  EXPECT_FALSE(rep.cases[1].passed);
  EXPECT_EQ(rep.cases[1].op, "mse_loss");  // read from the attributes despite the broken datasets
  EXPECT_EQ(rep.cases[1].reason,
            "kloss::golden: " + tf.path + ": case 'b_broken': dataset 'expected/output': missing dataset");
  EXPECT_TRUE(rep.cases[2].passed);
  // The selection sees every name and runs only the chosen ones.
  auto only = validate_file(tf.path, [](const std::string& n) { return n.find("good") != std::string::npos; });
  ASSERT_EQ(only.cases.size(), 2u);
  EXPECT_TRUE(only.cases[0].passed && only.cases[1].passed);
}

// --- vocabulary-parallel reads -------------------------------------------------------
namespace {
std::vector<double> iota(std::int64_t n, double from = 0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = from + static_cast<double>(i);
  return v;
}
}  // namespace

TEST(GoldenVocab, CrossEntropyReadsItsClassSlice) {
  TempFile tf("vocab_ce");
  const std::int64_t n = 3, v = 7;
  CaseToWrite c = case_of("ce", "cross_entropy", "float64");
  c.attributes["reduction"] = std::string("none");
  c.float_inputs["input"] = exp_of(Shape{n, v}, iota(n * v));  // value = row*7 + class
  c.float_inputs["weight"] = exp_of(Shape{v}, iota(v, 100));
  c.int_inputs["target"] = {Shape{n}, {0, 6, 3}};
  c.float_inputs["grad_output"] = exp_of(Shape{n}, {1, 2, 3});
  c.output = exp_of(Shape{n}, {9, 8, 7});
  c.grads["input"] = exp_of(Shape{n, v}, iota(n * v, 1000));
  // Unbatched input [C] with a scalar target: the class axis is 0.
  CaseToWrite u = case_of("ce_unbatched", "cross_entropy", "float32");
  u.float_inputs["input"] = exp_of(Shape{v}, iota(v));
  u.int_inputs["target"] = {Shape{}, {4}};
  u.output = exp_of(Shape{}, {1});
  // Probability targets are not vocabulary-parallel.
  CaseToWrite p = u;
  p.name = "ce_probs";
  p.int_inputs.clear();
  p.float_inputs["target"] = exp_of(Shape{v}, iota(v));
  write_golden_file(tf.path, {c, u, p});

  GoldenFile f(tf.path);
  EXPECT_TRUE(f.allows_vocab_parallel("ce"));
  EXPECT_TRUE(f.allows_vocab_parallel("ce_unbatched"));
  EXPECT_FALSE(f.allows_vocab_parallel("ce_probs"));
  EXPECT_KLOSS_THROW(f.read_case_vocab("ce_probs", 0, 2), NotImplemented,
                     "op 'cross_entropy' with class-probability targets cannot run vocabulary-parallel");
  // Up to 8 ranks for 7 classes: the last rank of 8 owns none.
  for (int size = 1; size <= 8; ++size)
    for (int rank = 0; rank < size; ++rank) {
      const Case r = f.read_case_vocab("ce", rank, size);
      const auto s = vocab_split(v, rank, size);
      ASSERT_TRUE(r.vocab.has_value());
      EXPECT_EQ(r.vocab->begin, s.begin);
      EXPECT_EQ(r.vocab->count, s.count);
      EXPECT_EQ(r.vocab->total, v);
      const auto& in = r.call.inputs.at("input");
      EXPECT_EQ(in.shape(), (Shape{n, s.count}));
      const auto iv = in.to_doubles();
      const auto gv = r.grads.at("input").values;
      EXPECT_EQ(r.grads.at("input").shape, (Shape{n, s.count}));
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t k = 0; k < s.count; ++k) {
          EXPECT_EQ(iv[i * s.count + k], static_cast<double>(i * v + s.begin + k));
          EXPECT_EQ(gv[i * s.count + k], 1000.0 + static_cast<double>(i * v + s.begin + k));
        }
      EXPECT_EQ(r.call.inputs.at("weight").to_doubles(), iota(s.count, 100.0 + static_cast<double>(s.begin)));
      // Replicated: the targets, the upstream gradient, the output.
      EXPECT_EQ(r.call.inputs.at("target").to_int64(), (std::vector<std::int64_t>{0, 6, 3}));
      EXPECT_EQ(r.call.grad_output->to_doubles(), (std::vector<double>{1, 2, 3}));
      EXPECT_EQ(r.output.values, (std::vector<double>{9, 8, 7}));

      const Case ur = f.read_case_vocab("ce_unbatched", rank, size);
      EXPECT_EQ(ur.call.inputs.at("input").shape(), (Shape{s.count}));
      EXPECT_EQ(ur.call.inputs.at("input").to_doubles(), iota(s.count, static_cast<double>(s.begin)));
    }
}

TEST(GoldenVocab, FusedLinearAndEmbeddingReadTheirRows) {
  TempFile tf("vocab_rows");
  const std::int64_t n = 2, d = 3, v = 5;
  CaseToWrite fl = case_of("flce", "fused_linear_cross_entropy", "float64");
  fl.float_inputs["input"] = exp_of(Shape{n, d}, iota(n * d));
  fl.float_inputs["weight"] = exp_of(Shape{v, d}, iota(v * d, 10));
  fl.float_inputs["bias"] = exp_of(Shape{v}, iota(v, 50));
  fl.float_inputs["ce_weight"] = exp_of(Shape{v}, iota(v, 60));
  fl.int_inputs["target"] = {Shape{n}, {4, 1}};
  fl.float_inputs["grad_output"] = exp_of(Shape{}, {1});
  fl.output = exp_of(Shape{}, {2});
  fl.grads["input"] = exp_of(Shape{n, d}, iota(n * d, 70));
  fl.grads["weight"] = exp_of(Shape{v, d}, iota(v * d, 80));
  fl.grads["bias"] = exp_of(Shape{v}, iota(v, 90));
  CaseToWrite em = case_of("emb", "embedding", "float32");
  em.int_inputs["input"] = {Shape{3}, {4, 0, 4}};
  em.float_inputs["weight"] = exp_of(Shape{v, d}, iota(v * d));
  em.float_inputs["grad_output"] = exp_of(Shape{3, d}, iota(3 * d));
  em.output = exp_of(Shape{3, d}, iota(3 * d));
  em.grads["weight"] = exp_of(Shape{v, d}, iota(v * d, 5));
  CaseToWrite bad = em;
  bad.name = "emb_bad_weight";
  bad.float_inputs["weight"] = exp_of(Shape{v}, iota(v));
  bad.grads.clear();
  bad.float_inputs.erase("grad_output");
  write_golden_file(tf.path, {fl, em, bad, mse_case("mse")});

  GoldenFile f(tf.path);
  EXPECT_FALSE(f.allows_vocab_parallel("mse"));
  EXPECT_KLOSS_THROW(f.read_case_vocab("mse", 0, 1), NotImplemented, "op 'mse_loss' cannot run vocabulary-parallel");
  EXPECT_KLOSS_THROW(f.read_case_vocab("emb_bad_weight", 0, 2), Hdf5Error,
                     "case 'emb_bad_weight': dataset 'inputs/weight': shape [5] has no vocabulary axis");
  for (int size = 1; size <= 3; ++size)
    for (int rank = 0; rank < size; ++rank) {
      const auto s = vocab_split(v, rank, size);
      const double b = static_cast<double>(s.begin);
      const Case r = f.read_case_vocab("flce", rank, size);
      EXPECT_EQ(r.call.inputs.at("weight").shape(), (Shape{s.count, d}));
      EXPECT_EQ(r.call.inputs.at("weight").to_doubles(), iota(s.count * d, 10 + b * d));
      EXPECT_EQ(r.call.inputs.at("bias").to_doubles(), iota(s.count, 50 + b));
      EXPECT_EQ(r.call.inputs.at("ce_weight").to_doubles(), iota(s.count, 60 + b));
      EXPECT_EQ(r.call.inputs.at("input").to_doubles(), iota(n * d));  // replicated
      EXPECT_EQ(r.grads.at("input").values, iota(n * d, 70));          // whole on every rank
      EXPECT_EQ(r.grads.at("weight").values, iota(s.count * d, 80 + b * d));
      EXPECT_EQ(r.grads.at("bias").values, iota(s.count, 90 + b));
      const Case e = f.read_case_vocab("emb", rank, size);
      EXPECT_EQ(e.call.inputs.at("weight").to_doubles(), iota(s.count * d, b * d));
      EXPECT_EQ(e.call.inputs.at("input").to_int64(), (std::vector<std::int64_t>{4, 0, 4}));
      EXPECT_EQ(e.grads.at("weight").values, iota(s.count * d, 5 + b * d));
      EXPECT_EQ(e.output.values, iota(3 * d));
    }
}

TEST(GoldenVocab, SliceLengthMustMatchTheVocabulary) {
  TempFile tf("vocab_mismatch");
  CaseToWrite c = case_of("c", "cross_entropy", "float64");
  c.float_inputs["input"] = exp_of(Shape{1, 4}, iota(4));
  c.float_inputs["weight"] = exp_of(Shape{3}, iota(3));
  c.int_inputs["target"] = {Shape{1}, {0}};
  c.output = exp_of(Shape{}, {1});
  write_golden_file(tf.path, {c});
  GoldenFile f(tf.path);
  EXPECT_KLOSS_THROW(f.read_case_vocab("c", 1, 2), Hdf5Error,
                     "dataset 'inputs/weight': has 3 entries along the vocabulary axis 0, the vocabulary has 4");
}

#ifdef KLOSS_HAVE_MPI
TEST(GoldenVocab, MpiIoRunReportsEveryAllowedCaseAndSkipsTheRest) {
  // This test program runs on one rank: the MPI-IO open, the hyperslab
  // reads and the agreement still go through MPI.
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ASSERT_EQ(size, 1);
  TempFile tf("vocab_mpi");
  CaseToWrite c = case_of("ce", "cross_entropy", "float64");
  c.attributes["reduction"] = std::string("sum");
  c.float_inputs["input"] = exp_of(Shape{1, 2}, {0, 0});
  c.int_inputs["target"] = {Shape{1}, {1}};
  c.output = exp_of(Shape{}, {std::log(2.0)});
  CaseToWrite broken = c;
  broken.name = "ce_broken";
  broken.float_inputs["weight"] = exp_of(Shape{5}, iota(5));
  write_golden_file(tf.path, {c, broken, mse_case("mse")});
  MPI_Comm comm;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  {
    GoldenFile f(tf.path, comm);
    int skipped = -1;
    auto reps = validate_cases_vocab_parallel(f, comm, {}, &skipped);
    EXPECT_EQ(skipped, 1);
    ASSERT_EQ(reps.size(), 2u);
    EXPECT_EQ(reps[0].name, "ce");
    EXPECT_EQ(reps[0].op, "cross_entropy");
    const OpInfo* op = find_op("cross_entropy");
    if (op && op->run_vocab_parallel) {
      EXPECT_TRUE(reps[0].passed) << reps[0].reason;
    } else {
      EXPECT_FALSE(reps[0].passed);
      EXPECT_NE(reps[0].reason.find(op ? "has no vocabulary-parallel entry point" : "no such op"), std::string::npos)
          << reps[0].reason;
    }
    EXPECT_FALSE(reps[1].passed);
    EXPECT_NE(reps[1].reason.find("dataset 'inputs/weight': has 5 entries along the vocabulary axis 0"),
              std::string::npos)
        << reps[1].reason;
  }
  EXPECT_KLOSS_THROW(GoldenFile("/nonexistent.h5", comm), Hdf5Error, "cannot be opened for reading");
  MPI_Comm_free(&comm);
}
#endif
