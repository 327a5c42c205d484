// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer target over the golden-file reader (include/kloss/golden.hpp).
//
// The fuzz input is a recipe, not a file: FuzzedDataProvider draws the
// file's structure from it - the schema attribute, the /cases group, cases
// with attributes of every type class and shape (fixed/variable strings,
// ints, uints, floats, enums, compounds, arrays, null dataspaces), inputs
// and expected datasets of every type class, rank 0-9, empty, mismatched
// and huge (chunked, never written) shapes, groups where datasets belong,
// dangling links - and writes it through the HDF5 C API into an in-memory
// (core driver) file. The reader then opens that file image and every case
// is summarised, read whole, checked for vocabulary-parallel use, read as
// each rank of 3, and its expectations compared with themselves. Any
// kloss::Error is a correct answer to a bad file; a crash, an ASan report,
// a hang or another exception escaping is a bug.
//
// Why a recipe: HDF5 1.10's own parser hangs and crashes on corrupt bytes
// (e.g. an endless loop in H5HG_read for a damaged global heap), which
// would drown the reader's own bugs. Setting KLOSS_FUZZ_RAW_IMAGE=1 fuzzes
// the raw bytes instead (the input is the file image), for those who want
// to find HDF5's bugs.
//
// Build (clang): cmake -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang
//   -DKLOSS_ENABLE_FUZZERS=ON ...; run (as the ctest fuzz_golden_reader):
//   fuzz_golden_reader -max_total_time=60 WORKDIR unit_tests/fuzz/corpus
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <kloss/golden.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using kloss::golden::Handle;

namespace {

// --- the reader under test ------------------------------------------------------
void exercise(const kloss::golden::Case& c) {
  // The comparison must accept what the reader produced.
  kloss::rt::Result r;
  r.output = kloss::rt::Buffer::from_doubles(kloss::rt::DType::float64, c.output.shape, c.output.values);
  for (const auto& [arg, e] : c.grads)
    r.grads[arg] = kloss::rt::Buffer::from_doubles(kloss::rt::DType::float64, e.shape, e.values);
  auto rep = kloss::golden::check_result(c, r);
  (void)rep;
  for (const auto& [name, buf] : c.call.inputs) (void)buf.to_doubles();
}

void read_image(const void* data, std::size_t size) {
  kloss::golden::ReadLimits limits;
  limits.max_elements = 1 << 16;  // keep each run small; the limit itself is under test
  limits.max_string = 1 << 12;
  try {
    auto f = kloss::golden::GoldenFile::from_image(data, size, "fuzz.h5", limits);
    for (const auto& name : f.case_names()) {
      try {
        (void)f.summary(name);
      } catch (const kloss::Error&) {
      }
      try {
        exercise(f.read_case(name));
      } catch (const kloss::Error&) {
      }
      try {
        if (f.allows_vocab_parallel(name))
          for (int rank = 0; rank < 3; ++rank) exercise(f.read_case_vocab(name, rank, 3));
      } catch (const kloss::Error&) {
      }
    }
  } catch (const kloss::Error&) {
  }
}

// --- the recipe -------------------------------------------------------------------
const char* const kOps[] = {"mse_loss",      "cross_entropy", "fused_linear_cross_entropy",
                            "embedding",     "nll_loss",      "ctc_loss",
                            "embedding_bag", "kl_div",        "no_such_op"};
const char* const kDtypes[] = {"float32", "float64", "float16", "bfloat16", "int32", "float8", ""};
const char* const kArgs[] = {"input",       "target",  "weight",  "bias", "ce_weight",
                             "grad_output", "targets", "offsets", "var"};
const char* const kOptions[] = {"reduction", "ignore_index", "label_smoothing", "margin",
                                "p",         "ctc_grad",     "index_dtype"};
const char* const kReductions[] = {"none", "mean", "sum", "batchmean", "median"};

template <std::size_t N>
const char* pick(FuzzedDataProvider& p, const char* const (&a)[N]) {
  return a[p.ConsumeIntegralInRange<std::size_t>(0, N - 1)];
}

std::string name_from(FuzzedDataProvider& p, const char* fallback) {
  std::string s = p.ConsumeRandomLengthString(12);
  std::string out;
  for (char c : s)
    if (c != '/' && c != '.' && c != '\0') out += c;
  return out.empty() ? fallback : out;
}

// Writes attribute `name`: mostly of the type the schema wants (`want`:
// 's' string, 'r' real, 'i' integer), else of any kind, so that most cases
// get deep into the reader and the rest probe its type checks.
void write_attr(FuzzedDataProvider& p, hid_t obj, const std::string& name, const std::string& text, char want = 's') {
  if (H5Aexists(obj, name.c_str()) != 0) return;
  int kind = p.ConsumeIntegralInRange(0, 11);
  if (p.ConsumeIntegralInRange(0, 7) != 0) {
    if (want == 's')
      kind = p.ConsumeIntegralInRange(0, 2);
    else if (want == 'r')
      kind = p.ConsumeBool() ? 6 : 7;
    else
      kind = 3;
  }
  hsize_t n = 1;
  Handle space;
  if (kind == 9)
    space = Handle(H5Screate(H5S_NULL));
  else if (kind == 10) {
    n = p.ConsumeIntegralInRange<hsize_t>(0, 3);
    space = Handle(H5Screate_simple(1, &n, nullptr));
  } else
    space = Handle(H5Screate(H5S_SCALAR));
  Handle type, mem;
  const char* str = text.c_str();
  std::vector<const char*> strs(static_cast<std::size_t>(n), str);
  std::vector<unsigned char> fixed;
  const double d = p.ConsumeIntegralInRange(0, 7) ? p.ConsumeProbability<double>() : p.ConsumeFloatingPoint<double>();
  const std::int64_t i = p.ConsumeIntegral<std::int64_t>();
  const signed char b = p.ConsumeBool() ? 1 : 0;
  const void* src = nullptr;
  auto copy = [](hid_t t) { return Handle(H5Tcopy(t)); };
  struct Numeric {
    hid_t file, mem;
    const void* src;
  };
  const Numeric numeric[] = {{H5T_STD_I64LE, H5T_NATIVE_INT64, &i},
                             {H5T_STD_U64LE, H5T_NATIVE_INT64, &i},
                             {H5T_STD_I8LE, H5T_NATIVE_INT64, &i},
                             {H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &d},
                             {H5T_IEEE_F32BE, H5T_NATIVE_DOUBLE, &d}};
  switch (kind) {
    case 0:
    case 1:
    case 10:  // variable-length string(s), UTF-8 or ASCII
      type = copy(H5T_C_S1);
      H5Tset_size(type.get(), H5T_VARIABLE);
      H5Tset_cset(type.get(), kind == 1 ? H5T_CSET_ASCII : H5T_CSET_UTF8);
      mem = copy(type.get());
      src = strs.data();
      break;
    case 2: {  // fixed-length string, any padding
      const std::size_t len = text.size() + p.ConsumeIntegralInRange<std::size_t>(0, 3);
      type = copy(H5T_C_S1);
      H5Tset_size(type.get(), len == 0 ? 1 : len);
      H5Tset_strpad(type.get(), static_cast<H5T_str_t>(p.ConsumeIntegralInRange(0, 2)));
      mem = copy(type.get());
      fixed.assign(len + 1, 0);
      std::copy(text.begin(), text.end(), fixed.begin());
      src = fixed.data();
      break;
    }
    case 3:
    case 4:
    case 5:
    case 6:
    case 7: {  // an integer or a real of another width, sign or byte order
      const Numeric& t = numeric[kind - 3];
      type = copy(t.file), mem = copy(t.mem), src = t.src;
      break;
    }
    case 8: {
      type = Handle(H5Tenum_create(H5T_NATIVE_SCHAR));
      const signed char v0 = 0, v1 = 1;
      H5Tenum_insert(type.get(), "FALSE", &v0);
      H5Tenum_insert(type.get(), "TRUE", &v1);
      mem = copy(type.get());
      src = &b;
      break;
    }
    case 9:
      type = copy(H5T_IEEE_F64LE);
      break;
    default:
      type = Handle(H5Tcreate(H5T_COMPOUND, 8));
      H5Tinsert(type.get(), "x", 0, H5T_NATIVE_DOUBLE);
      mem = copy(type.get());
      src = &d;
  }
  if (!type || !space) return;
  Handle a(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!a || !src || !mem || n == 0) return;
  H5Awrite(a.get(), mem.get(), src);
}

void write_dataset(FuzzedDataProvider& p, hid_t loc, const std::string& name, std::vector<hsize_t> dims) {
  if (H5Lexists(loc, name.c_str(), H5P_DEFAULT) != 0) return;
  // 0-11: something odd; 12-15: int64; 16-31: float64.
  const int what = p.ConsumeIntegralInRange(0, 31);
  if (what == 0) {  // a group where a dataset belongs
    Handle g(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    return;
  }
  if (what == 1) {  // a dangling soft link
    H5Lcreate_soft("/nowhere", loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
    return;
  }
  if (what == 2 || dims.size() > 9) {  // another rank, maybe beyond 8
    dims.assign(p.ConsumeIntegralInRange<std::size_t>(0, 9), 0);
    for (auto& d : dims) d = p.ConsumeIntegralInRange<hsize_t>(0, 4);
  }
  bool huge = false;
  if (what == 3 && !dims.empty()) {  // huge extents, never written
    dims[p.ConsumeIntegralInRange<std::size_t>(0, dims.size() - 1)] =
        p.ConsumeIntegralInRange<hsize_t>(1, hsize_t(1) << 40);
    huge = true;
  }
  // The file type and the memory type the values are written from: 4-9
  // another type class, byte order or width.
  const std::pair<hid_t, hid_t> odd_types[] = {{H5T_STD_I64LE, H5T_NATIVE_INT64},
                                               {H5T_STD_U64LE, H5T_NATIVE_UINT64},
                                               {H5T_IEEE_F32BE, H5T_NATIVE_FLOAT},
                                               {H5T_STD_U8LE, H5T_NATIVE_UINT8},
                                               {H5T_C_S1, H5T_C_S1},
                                               {H5T_STD_I32BE, H5T_NATIVE_INT32}};
  hid_t file_type = H5T_IEEE_F64LE, mem_type = H5T_NATIVE_DOUBLE;
  if (what >= 4 && what <= 9) std::tie(file_type, mem_type) = odd_types[what - 4];
  if (what >= 12 && what <= 15) file_type = H5T_STD_I64LE, mem_type = H5T_NATIVE_INT64;
  Handle space(what == 11     ? H5Screate(H5S_NULL)
               : dims.empty() ? H5Screate(H5S_SCALAR)
                              : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  if (!space) return;
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (huge) {
    std::vector<hsize_t> chunk(dims.size(), 1);
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
  }
  Handle d(H5Dcreate2(loc, name.c_str(), file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!d || huge || what == 11 || what == 8) return;
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n <= 0 || n > 4096) return;
  std::vector<std::uint64_t> vals(static_cast<std::size_t>(n));
  for (auto& v : vals) {
    if (mem_type == H5T_NATIVE_DOUBLE) {
      const double x = p.ConsumeProbability<double>() * 8 - 4;
      std::memcpy(&v, &x, 8);
    } else if (mem_type == H5T_NATIVE_FLOAT) {
      const float x = p.ConsumeFloatingPoint<float>();
      std::memcpy(&v, &x, 4);
    } else {
      v = p.ConsumeIntegralInRange<std::uint64_t>(0, 6);
    }
  }
  if (mem_type != H5T_NATIVE_DOUBLE && mem_type != H5T_NATIVE_INT64 && mem_type != H5T_NATIVE_UINT64) {
    // Pack the narrower element types.
    const std::size_t es = H5Tget_size(mem_type);
    std::vector<unsigned char> packed(static_cast<std::size_t>(n) * es);
    for (std::size_t i = 0; i < vals.size(); ++i) std::memcpy(&packed[i * es], &vals[i], es);
    H5Dwrite(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, packed.data());
    return;
  }
  H5Dwrite(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, vals.data());
}

std::vector<hsize_t> some_dims(FuzzedDataProvider& p) {
  std::vector<hsize_t> d(p.ConsumeIntegralInRange<std::size_t>(0, 3));
  for (auto& x : d) x = p.ConsumeIntegralInRange<hsize_t>(0, 5);
  return d;
}

// Writes the recipe's file into memory; returns its image (empty on failure).
std::vector<unsigned char> build_image(FuzzedDataProvider& p) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl || H5Pset_fapl_core(fapl.get(), 1 << 16, false) < 0) return {};
  Handle f(H5Fcreate("fuzz-recipe.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  if (!f) return {};
  const int schema = p.ConsumeIntegralInRange(0, 9);
  if (schema < 7)
    write_attr(p, f.get(), "schema", "kloss-golden/1");
  else if (schema == 7)
    write_attr(p, f.get(), "schema", "kloss-golden/2");
  const int cases_kind = p.ConsumeIntegralInRange(0, 15);
  if (cases_kind == 0) {
    Handle s(H5Screate(H5S_SCALAR));
    Handle d(H5Dcreate2(f.get(), "cases", H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  } else if (cases_kind != 1) {
    Handle cases(H5Gcreate2(f.get(), "cases", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    const int ncases = p.ConsumeIntegralInRange(0, 3);
    for (int i = 0; i < ncases && cases; ++i) {
      const std::string cname = name_from(p, "c") + std::to_string(i);
      Handle g(H5Gcreate2(cases.get(), cname.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      if (!g) continue;
      if (p.ConsumeIntegralInRange(0, 9)) write_attr(p, g.get(), "op", pick(p, kOps));
      if (p.ConsumeIntegralInRange(0, 9)) write_attr(p, g.get(), "dtype", pick(p, kDtypes));
      if (p.ConsumeIntegralInRange(0, 9)) write_attr(p, g.get(), "rtol", "1e-3", 'r');
      if (p.ConsumeIntegralInRange(0, 9)) write_attr(p, g.get(), "atol", "1e-3", 'r');
      if (p.ConsumeBool()) write_attr(p, g.get(), "reduction", pick(p, kReductions));
      const int nopt = p.ConsumeIntegralInRange(0, 3);
      for (int k = 0; k < nopt; ++k) {
        const char* opt = pick(p, kOptions);
        const int t = p.ConsumeIntegralInRange(0, 2);
        write_attr(p, g.get(), opt, t == 0 ? "int64" : "true", t == 0 ? 's' : t == 1 ? 'r' : 'i');
      }
      Handle in, ex;
      if (p.ConsumeIntegralInRange(0, 15))
        in = Handle(H5Gcreate2(g.get(), "inputs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      if (p.ConsumeIntegralInRange(0, 15))
        ex = Handle(H5Gcreate2(g.get(), "expected", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      std::vector<std::pair<std::string, std::vector<hsize_t>>> made;
      const int nin = p.ConsumeIntegralInRange(0, 5);
      for (int k = 0; k < nin && in; ++k) {
        const std::string arg = p.ConsumeIntegralInRange(0, 7) ? pick(p, kArgs) : name_from(p, "x");
        auto dims = made.empty() || p.ConsumeBool() ? some_dims(p) : made.back().second;
        write_dataset(p, in.get(), arg, dims);
        made.emplace_back(arg, dims);
      }
      if (ex) {
        auto out_dims = p.ConsumeBool() ? std::vector<hsize_t>{} : some_dims(p);
        if (p.ConsumeIntegralInRange(0, 9)) write_dataset(p, ex.get(), "output", out_dims);
        for (const auto& [arg, dims] : made)
          if (arg != "grad_output" && p.ConsumeBool())
            write_dataset(p, ex.get(), "grad_" + arg, p.ConsumeIntegralInRange(0, 5) ? dims : some_dims(p));
        if (p.ConsumeIntegralInRange(0, 7) == 0) write_dataset(p, ex.get(), name_from(p, "extra"), some_dims(p));
      }
    }
  }
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) return {};
  const ssize_t n = H5Fget_file_image(f.get(), nullptr, 0);
  if (n <= 0) return {};
  std::vector<unsigned char> image(static_cast<std::size_t>(n));
  if (H5Fget_file_image(f.get(), image.data(), image.size()) != n) return {};
  return image;
}

const bool raw_mode = [] {
  const char* e = std::getenv("KLOSS_FUZZ_RAW_IMAGE");
  return e && *e == '1';
}();

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kloss::golden::silence_hdf5_errors();
  if (raw_mode) {
    read_image(data, size);
    return 0;
  }
  FuzzedDataProvider p(data, size);
  const auto image = build_image(p);
  if (!image.empty()) read_image(image.data(), image.size());
  return 0;
}
