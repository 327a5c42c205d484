// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The HDF5 golden-file writer (schema kloss-golden/1), used by the tests
// and tools that write cases.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <kloss/checks.hpp>
#include <kloss/golden.hpp>
#include <kloss/registry.hpp>
#include <limits>
#include <sstream>

namespace kloss::golden {
// --- writing --------------------------------------------------------------------
namespace {

[[noreturn]] void wfail(const std::string& path, const std::string& what) {
  throw Hdf5Error("kloss::golden: " + path + ": writing: " + what);
}

Handle vlen_utf8() {
  Handle t(H5Tcopy(H5T_C_S1));
  if (!t || H5Tset_size(t.get(), H5T_VARIABLE) < 0 || H5Tset_cset(t.get(), H5T_CSET_UTF8) < 0) return Handle();
  return t;
}

void write_attr(hid_t obj, const std::string& name, const rt::OptionValue& v, const std::string& path) {
  Handle space(H5Screate(H5S_SCALAR));
  if (!space) wfail(path, "H5Screate");
  Handle type;
  hid_t mem;
  const void* buf;
  const char* str = nullptr;
  if (auto i = std::get_if<std::int64_t>(&v)) {
    mem = H5T_NATIVE_INT64;
    type = Handle(H5Tcopy(H5T_STD_I64LE));
    buf = i;
  } else if (auto d = std::get_if<double>(&v)) {
    mem = H5T_NATIVE_DOUBLE;
    type = Handle(H5Tcopy(H5T_IEEE_F64LE));
    buf = d;
  } else {
    type = vlen_utf8();
    mem = type.get();
    str = std::get<std::string>(v).c_str();
    buf = &str;
  }
  if (!type) wfail(path, "type of attribute " + name);
  Handle a(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!a || H5Awrite(a.get(), mem, buf) < 0) wfail(path, "attribute " + name);
}

void write_dataset(hid_t group, const std::string& name, const Shape& shape, bool integer, const void* data,
                   const std::string& path) {
  hsize_t dims[max_rank] = {};
  for (int d = 0; d < shape.rank; ++d) dims[d] = static_cast<hsize_t>(shape.extent[d]);
  Handle space(shape.rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(shape.rank, dims, nullptr));
  if (!space) wfail(path, "dataspace of " + name);
  Handle d(H5Dcreate2(group, name.c_str(), integer ? H5T_STD_I64LE : H5T_IEEE_F64LE, space.get(), H5P_DEFAULT,
                      H5P_DEFAULT, H5P_DEFAULT));
  if (!d) wfail(path, "dataset " + name);
  if (shape.numel() > 0 &&
      H5Dwrite(d.get(), integer ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    wfail(path, "data of " + name);
}

Handle make_group(hid_t loc, const std::string& name, const std::string& path) {
  Handle g(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!g) wfail(path, "group " + name);
  return g;
}

}  // namespace

void write_golden_file(const std::string& path, const std::vector<CaseToWrite>& cases) {
  silence_hdf5_errors();
  Handle f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!f) wfail(path, "cannot create the file");
  write_attr(f.get(), "schema", std::string(schema_version), path);
  Handle root = make_group(f.get(), "cases", path);
  for (const auto& c : cases) {
    Handle g = make_group(root.get(), c.name, path);
    write_attr(g.get(), "op", c.op, path);
    write_attr(g.get(), "dtype", c.dtype, path);
    if (c.index_dtype) write_attr(g.get(), "index_dtype", *c.index_dtype, path);
    write_attr(g.get(), "rtol", c.rtol, path);
    write_attr(g.get(), "atol", c.atol, path);
    for (const auto& [k, v] : c.attributes) write_attr(g.get(), k, v, path);
    Handle in = make_group(g.get(), "inputs", path);
    for (const auto& [k, v] : c.float_inputs) {
      if (static_cast<std::int64_t>(v.values.size()) != v.shape.numel()) wfail(path, "value count of " + k);
      write_dataset(in.get(), k, v.shape, false, v.values.data(), path);
    }
    for (const auto& [k, v] : c.int_inputs) {
      if (static_cast<std::int64_t>(v.second.size()) != v.first.numel()) wfail(path, "value count of " + k);
      write_dataset(in.get(), k, v.first, true, v.second.data(), path);
    }
    Handle ex = make_group(g.get(), "expected", path);
    if (static_cast<std::int64_t>(c.output.values.size()) != c.output.shape.numel()) wfail(path, "output value count");
    write_dataset(ex.get(), "output", c.output.shape, false, c.output.values.data(), path);
    for (const auto& [k, v] : c.grads) {
      if (static_cast<std::int64_t>(v.values.size()) != v.shape.numel()) wfail(path, "value count of grad_" + k);
      write_dataset(ex.get(), "grad_" + k, v.shape, false, v.values.data(), path);
    }
  }
  // Close explicitly so that a failed flush is reported, not swallowed.
  root.reset();
  if (H5Fclose(f.release()) < 0) wfail(path, "cannot close the file");
}

}  // namespace kloss::golden
