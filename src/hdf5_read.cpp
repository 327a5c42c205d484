// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The HDF5 golden-file reader (schema kloss-golden/1, docs/golden-schema.md
// and docs/validation.md).
//
// Reading is defensive because files come from anyone: every HDF5 return
// code is checked, every identifier is owned by a Handle, HDF5's error-stack
// printing is off, type classes and ranks are checked before reading, and a
// dataset's element count is checked against ReadLimits before anything is
// allocated. Every error is a kloss::Hdf5Error naming file, case and item.
#include <kloss/config.hpp>
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
// --- HDF5 plumbing ------------------------------------------------------------
void silence_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

void Handle::reset() noexcept {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    default:
      break;
  }
  id_ = H5I_INVALID_HID;
}

namespace {

// Where a read is: the file, the case (empty for file-level items).
struct Where {
  const std::string& file;
  const std::string& kase;
};

template <class... Parts>
[[noreturn]] void bad(const Where& w, std::string_view item, const Parts&... parts) {
  if (w.kase.empty()) throw Hdf5Error(impl::concat("kloss::golden: ", w.file, ": ", item, ": ", parts...));
  throw Hdf5Error(impl::concat("kloss::golden: ", w.file, ": case '", w.kase, "': ", item, ": ", parts...));
}

const char* class_name(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER:
      return "integer";
    case H5T_FLOAT:
      return "float";
    case H5T_TIME:
      return "time";
    case H5T_STRING:
      return "string";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_COMPOUND:
      return "compound";
    case H5T_REFERENCE:
      return "reference";
    case H5T_ENUM:
      return "enum";
    case H5T_VLEN:
      return "variable-length";
    case H5T_ARRAY:
      return "array";
    default:
      return "unknown";
  }
}

// Whether link `name` exists in `loc` (a single path component).
bool exists(hid_t loc, const std::string& name, const Where& w, std::string_view item) {
  const htri_t e = H5Lexists(loc, name.c_str(), H5P_DEFAULT);
  if (e < 0) bad(w, item, "cannot look up the link");
  return e > 0;
}

Handle open_group(hid_t loc, const std::string& name, const Where& w, std::string_view item) {
  if (!exists(loc, name, w, item)) bad(w, item, "missing group");
  Handle h(H5Oopen(loc, name.c_str(), H5P_DEFAULT));
  if (!h) bad(w, item, "cannot open (broken link?)");
  if (H5Iget_type(h.get()) != H5I_GROUP) bad(w, item, "is not a group");
  return h;
}

// Names of the links in a group, in name order.
std::vector<std::string> link_names(hid_t group, const Where& w, std::string_view item) {
  H5G_info_t info;
  if (H5Gget_info(group, &info) < 0) bad(w, item, "cannot list the group");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (n < 0) bad(w, item, "cannot read the name of link ", i);
    std::string s(static_cast<std::size_t>(n) + 1, '\0');
    if (H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size(), H5P_DEFAULT) < 0)
      bad(w, item, "cannot read the name of link ", i);
    s.resize(static_cast<std::size_t>(n));
    names.push_back(std::move(s));
  }
  return names;
}

herr_t collect_attr(hid_t, const char* name, const H5A_info_t*, void* data) {
  try {
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
  } catch (...) {
    return -1;
  }
}

std::vector<std::string> attribute_names(hid_t obj, const Where& w) {
  std::vector<std::string> names;
  hsize_t idx = 0;
  if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr, &names) < 0)
    bad(w, "attributes", "cannot list the attributes");
  return names;
}

// An attribute's single value: scalar dataspace or one element.
void check_single(hid_t attr, const Where& w, const std::string& item) {
  Handle s(H5Aget_space(attr));
  if (!s) bad(w, item, "cannot read its dataspace");
  const H5S_class_t sc = H5Sget_simple_extent_type(s.get());
  if (sc == H5S_NULL) bad(w, item, "has an empty (null) dataspace; expected a scalar");
  if (sc == H5S_SCALAR) return;
  const hssize_t n = H5Sget_simple_extent_npoints(s.get());
  if (sc != H5S_SIMPLE || n != 1) bad(w, item, "must be a scalar, got ", n, " elements");
}

bool integer_type_ok(hid_t t) {
  const std::size_t size = H5Tget_size(t);
  const H5T_sign_t sign = H5Tget_sign(t);
  if (size == 0 || size > 8 || sign == H5T_SGN_ERROR) return false;
  return !(size == 8 && sign == H5T_SGN_NONE);  // uint64 may not fit int64
}

// Reads a string attribute (fixed or variable length, ASCII or UTF-8).
std::string read_string_attr(hid_t attr, hid_t type, const Where& w, const std::string& item, const ReadLimits& lim) {
  const htri_t vl = H5Tis_variable_str(type);
  if (vl < 0) bad(w, item, "cannot inspect the string type");
  const H5T_cset_t cset = H5Tget_cset(type);
  if (cset < 0) bad(w, item, "cannot read the character set");
  Handle mem(H5Tcopy(H5T_C_S1));
  if (!mem || H5Tset_cset(mem.get(), cset) < 0) bad(w, item, "cannot make a string type");
  if (vl > 0) {
    if (H5Tset_size(mem.get(), H5T_VARIABLE) < 0) bad(w, item, "cannot make a string type");
    char* p = nullptr;
    if (H5Aread(attr, mem.get(), &p) < 0) bad(w, item, "cannot read the string");
    std::string s;
    bool too_long = false;
    if (p) {
      const std::size_t n = strnlen(p, lim.max_string + 1);
      too_long = n > lim.max_string;
      if (!too_long) s.assign(p, n);
    }
    Handle space(H5Aget_space(attr));
    if (p && space) {
#if H5_VERSION_GE(1, 12, 0)
      H5Treclaim(mem.get(), space.get(), H5P_DEFAULT, &p);
#else
      H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, &p);
#endif
    }
    if (too_long) bad(w, item, "string longer than ", lim.max_string, " bytes");
    return s;
  }
  const std::size_t size = H5Tget_size(type);
  if (size == 0) bad(w, item, "string type of size 0");
  if (size > lim.max_string) bad(w, item, "string longer than ", lim.max_string, " bytes");
  const H5T_str_t pad = H5Tget_strpad(type);
  if (H5Tset_size(mem.get(), size) < 0 || H5Tset_strpad(mem.get(), H5T_STR_NULLPAD) < 0)
    bad(w, item, "cannot make a string type");
  std::vector<char> buf(size + 1, '\0');
  if (H5Aread(attr, mem.get(), buf.data()) < 0) bad(w, item, "cannot read the string");
  std::string s(buf.data(), strnlen(buf.data(), size));
  if (pad == H5T_STR_SPACEPAD)
    while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Reads any attribute as an option value: integers (and enums, h5py's
// booleans) as int64, floats as double, strings as string.
rt::OptionValue read_attr(hid_t obj, const std::string& name, const Where& w, const ReadLimits& lim) {
  const std::string item = "attribute '" + name + "'";
  Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
  if (!a) bad(w, item, "cannot open");
  Handle t(H5Aget_type(a.get()));
  if (!t) bad(w, item, "cannot read its type");
  const H5T_class_t cls = H5Tget_class(t.get());
  check_single(a.get(), w, item);
  switch (cls) {
    case H5T_STRING:
      return read_string_attr(a.get(), t.get(), w, item, lim);
    case H5T_INTEGER: {
      if (!integer_type_ok(t.get())) bad(w, item, "integer type does not fit int64");
      std::int64_t v = 0;
      if (H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0) bad(w, item, "cannot read the integer");
      return v;
    }
    case H5T_FLOAT: {
      double v = 0;
      if (H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) < 0) bad(w, item, "cannot read the real");
      return v;
    }
    case H5T_ENUM: {
      Handle base(H5Tget_super(t.get()));
      if (!base || H5Tget_class(base.get()) != H5T_INTEGER || !integer_type_ok(base.get()))
        bad(w, item, "enum whose base type is not an integer that fits int64");
      alignas(8) unsigned char buf[16] = {};
      if (H5Tget_size(t.get()) > 8 || H5Aread(a.get(), t.get(), buf) < 0) bad(w, item, "cannot read the enum");
      if (H5Tconvert(base.get(), H5T_NATIVE_INT64, 1, buf, nullptr, H5P_DEFAULT) < 0)
        bad(w, item, "cannot convert the enum");
      std::int64_t v;
      std::memcpy(&v, buf, sizeof v);
      return v;
    }
    default:
      bad(w, item, "has type class ", class_name(cls), "; expected an integer, a real or a string");
  }
}

std::string string_attr(hid_t obj, const std::string& name, const Where& w, const ReadLimits& lim) {
  auto v = read_attr(obj, name, w, lim);
  if (auto s = std::get_if<std::string>(&v)) return *s;
  bad(w, "attribute '" + name + "'", "must be a string");
}

double real_attr(hid_t obj, const std::string& name, const Where& w, const ReadLimits& lim) {
  auto v = read_attr(obj, name, w, lim);
  if (auto d = std::get_if<double>(&v)) return *d;
  if (auto i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  bad(w, "attribute '" + name + "'", "must be a real number");
}

bool has_attr(hid_t obj, const std::string& name, const Where& w) {
  const htri_t e = H5Aexists(obj, name.c_str());
  if (e < 0) bad(w, "attribute '" + name + "'", "cannot look it up");
  return e > 0;
}

enum class Kind { floating, integer, either };

// A dataset as read: shape and values in float64 or int64.
struct Data {
  Shape shape;
  bool integer = false;
  std::vector<double> reals;
  std::vector<std::int64_t> ints;
};

// A slice along one axis: [begin, begin + count) of `total`.
struct Slice {
  int axis = 0;
  VocabRange range;
};

struct DatasetInfo {
  Handle dset, space;
  Shape shape;
  bool integer = false;
};

DatasetInfo inspect(hid_t group, const std::string& name, const std::string& item, const Where& w, Kind kind,
                    const ReadLimits& lim) {
  DatasetInfo di;
  if (!exists(group, name, w, item)) bad(w, item, "missing dataset");
  di.dset = Handle(H5Oopen(group, name.c_str(), H5P_DEFAULT));
  if (!di.dset) bad(w, item, "cannot open (broken link?)");
  if (H5Iget_type(di.dset.get()) != H5I_DATASET) bad(w, item, "is not a dataset");
  Handle t(H5Dget_type(di.dset.get()));
  if (!t) bad(w, item, "cannot read its type");
  const H5T_class_t cls = H5Tget_class(t.get());
  if (cls == H5T_FLOAT) {
    di.integer = false;
  } else if (cls == H5T_INTEGER) {
    if (!integer_type_ok(t.get())) bad(w, item, "integer type does not fit int64");
    di.integer = true;
  } else {
    bad(w, item, "has type class ", class_name(cls), "; expected ",
        kind == Kind::integer    ? "int64"
        : kind == Kind::floating ? "float64"
                                 : "float64 or int64");
  }
  if (kind == Kind::floating && di.integer) bad(w, item, "has type class integer; expected float64");
  if (kind == Kind::integer && !di.integer) bad(w, item, "has type class float; expected int64");
  di.space = Handle(H5Dget_space(di.dset.get()));
  if (!di.space) bad(w, item, "cannot read its dataspace");
  const H5S_class_t sc = H5Sget_simple_extent_type(di.space.get());
  if (sc == H5S_NULL) bad(w, item, "has an empty (null) dataspace");
  if (sc != H5S_SCALAR && sc != H5S_SIMPLE) bad(w, item, "has an unknown dataspace class");
  const int rank = H5Sget_simple_extent_ndims(di.space.get());
  if (rank < 0) bad(w, item, "cannot read its rank");
  if (rank > max_rank) bad(w, item, "rank ", rank, " exceeds kloss's maximum ", max_rank);
  hsize_t dims[max_rank] = {};
  if (rank > 0 && H5Sget_simple_extent_dims(di.space.get(), dims, nullptr) < 0) bad(w, item, "cannot read its shape");
  std::int64_t numel = 1;
  di.shape.rank = rank;
  for (int d = 0; d < rank; ++d) {
    if (dims[d] > static_cast<hsize_t>(lim.max_elements))
      bad(w, item, "extent ", dims[d], " of dimension ", d, " exceeds the limit of ", lim.max_elements, " elements");
    di.shape.extent[d] = static_cast<std::int64_t>(dims[d]);
    if (di.shape.extent[d] != 0 && numel > lim.max_elements / di.shape.extent[d])
      bad(w, item, "more than ", lim.max_elements, " elements");
    numel *= di.shape.extent[d];
  }
  return di;
}

Data read_dataset(hid_t group, const std::string& name, const std::string& item, const Where& w, Kind kind,
                  const ReadLimits& lim, const std::optional<Slice>& slice = std::nullopt) {
  DatasetInfo di = inspect(group, name, item, w, kind, lim);
  Data d;
  d.integer = di.integer;
  d.shape = di.shape;
  Handle mem;  // H5S_ALL unless sliced
  if (slice) {
    const int ax = slice->axis;
    if (di.shape.rank <= ax)
      bad(w, item, "rank ", di.shape.rank, " has no vocabulary axis ", ax, " (shape ", di.shape.str(), ")");
    if (di.shape.extent[ax] != slice->range.total)
      bad(w, item, "has ", di.shape.extent[ax], " entries along the vocabulary axis ", ax, ", the vocabulary has ",
          slice->range.total, " (shape ", di.shape.str(), ")");
    hsize_t start[max_rank] = {}, count[max_rank] = {};
    for (int k = 0; k < di.shape.rank; ++k) count[k] = static_cast<hsize_t>(di.shape.extent[k]);
    start[ax] = static_cast<hsize_t>(slice->range.begin);
    count[ax] = static_cast<hsize_t>(slice->range.count);
    d.shape.extent[ax] = slice->range.count;
    if (d.shape.numel() > 0) {
      if (H5Sselect_hyperslab(di.space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) < 0)
        bad(w, item, "cannot select the hyperslab of rows ", slice->range.begin, "..",
            slice->range.begin + slice->range.count);
      mem = Handle(H5Screate_simple(di.shape.rank, count, nullptr));
      if (!mem) bad(w, item, "cannot create the memory dataspace");
    }
  }
  const auto n = static_cast<std::size_t>(d.shape.numel());
  if (d.integer)
    d.ints.assign(n, 0);
  else
    d.reals.assign(n, 0.0);
  if (n == 0) return d;
  const hid_t mem_space = mem ? mem.get() : H5S_ALL;
  const hid_t file_space = mem ? di.space.get() : H5S_ALL;
  const herr_t st = d.integer
                        ? H5Dread(di.dset.get(), H5T_NATIVE_INT64, mem_space, file_space, H5P_DEFAULT, d.ints.data())
                        : H5Dread(di.dset.get(), H5T_NATIVE_DOUBLE, mem_space, file_space, H5P_DEFAULT, d.reals.data());
  if (st < 0) bad(w, item, "cannot read the data");
  return d;
}

// The kind of an argument, from the op's registry entry: index inputs are
// int64 datasets, index-or-real ones (cross_entropy's target) either, the
// rest float64. Arguments of ops kloss does not know: either.
Kind arg_kind(const std::string& op, const std::string& arg) {
  if (arg == "grad_output") return Kind::floating;
  const OpInfo* info = find_op(op);
  if (!info) return Kind::either;
  auto has = [&](const std::vector<std::string_view>& v) { return std::find(v.begin(), v.end(), arg) != v.end(); };
  if (has(info->index_or_real_inputs)) return Kind::either;
  return has(info->index_inputs) ? Kind::integer : Kind::floating;
}

// The vocabulary-sized inputs of a vocabulary-parallel op and their axes.
std::map<std::string, int> vocab_axes(const std::string& op, int input_rank) {
  if (op == "cross_entropy") return {{"input", input_rank == 1 ? 0 : 1}, {"weight", 0}};
  if (op == "fused_linear_cross_entropy") return {{"weight", 0}, {"bias", 0}, {"ce_weight", 0}};
  if (op == "embedding") return {{"weight", 0}};
  return {};
}

const std::set<std::string> not_options = {"op", "dtype", "index_dtype", "rtol", "atol"};

}  // namespace

// --- GoldenFile -----------------------------------------------------------------
GoldenFile::GoldenFile(const std::string& path, ReadLimits limits) : GoldenFile(std::string(path), limits, 0) {
  silence_hdf5_errors();
  const std::string none;
  const Where w{path_, none};
  {
    std::ifstream probe(path_, std::ios::binary);
    if (!probe) bad(w, "file", "cannot be opened for reading (missing or unreadable)");
  }
  const htri_t is = H5Fis_hdf5(path_.c_str());
  if (is <= 0) bad(w, "file", "is not an HDF5 file");
  file_ = Handle(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file_) bad(w, "file", "HDF5 cannot open it (corrupt?)");
  init();
}

GoldenFile GoldenFile::from_image(const void* data, std::size_t size, const std::string& label, ReadLimits limits) {
  silence_hdf5_errors();
  GoldenFile f(std::string(label), limits, 0);
  const std::string none;
  const Where w{f.path_, none};
  if (!data || size == 0) bad(w, "file", "is empty, not an HDF5 file");
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl || H5Pset_fapl_core(fapl.get(), 1 << 16, false) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<void*>(data), size) < 0)
    bad(w, "file", "cannot set up the in-memory file access");
  f.file_ = Handle(H5Fopen(f.path_.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!f.file_) bad(w, "file", "is not an HDF5 file (HDF5 cannot open the image)");
  f.init();
  return f;
}

#ifdef KLOSS_HAVE_MPI
GoldenFile::GoldenFile(const std::string& path, MPI_Comm comm, ReadLimits limits)
    : GoldenFile(std::string(path), limits, 0) {
  silence_hdf5_errors();
  const std::string none;
  const Where w{path_, none};
  // Decide on rank 0 whether the file is HDF5 at all and tell every rank,
  // so that either all ranks open it (collectively) or none does.
  int ok = 1;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    std::ifstream probe(path_, std::ios::binary);
    ok = probe ? (H5Fis_hdf5(path_.c_str()) > 0 ? 1 : 2) : 0;
  }
  if (MPI_Bcast(&ok, 1, MPI_INT, 0, comm) != MPI_SUCCESS) bad(w, "file", "MPI_Bcast failed");
  if (ok == 0) bad(w, "file", "cannot be opened for reading (missing or unreadable)");
  if (ok == 2) bad(w, "file", "is not an HDF5 file");
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl || H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL) < 0)
    bad(w, "file", "cannot set up MPI-IO file access");
  file_ = Handle(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, fapl.get()));
  int opened = file_ ? 1 : 0, all = 0;
  if (MPI_Allreduce(&opened, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) bad(w, "file", "MPI_Allreduce failed");
  if (!all) bad(w, "file", "HDF5 cannot open it with MPI-IO on every rank");
  init();
}
#endif

void GoldenFile::init() {
  const std::string none;
  const Where w{path_, none};
  if (!has_attr(file_.get(), "schema", w)) bad(w, "attribute '/schema'", "missing; this is not a kloss golden file");
  const std::string schema = string_attr(file_.get(), "schema", w, limits_);
  if (schema != schema_version)
    bad(w, "attribute '/schema'", "unknown schema version '", schema, "'; this reader knows '", schema_version, "'");
  Handle cases = open_group(file_.get(), "cases", w, "group '/cases'");
  names_ = link_names(cases.get(), w, "group '/cases'");
}

CaseSummary GoldenFile::summary(const std::string& name) const {
  const Where w{path_, name};
  Handle cases = open_group(file_.get(), "cases", w, "group '/cases'");
  Handle g = open_group(cases.get(), name, w, "group");
  CaseSummary s;
  s.name = name;
  if (!has_attr(g.get(), "op", w)) bad(w, "attribute 'op'", "missing");
  s.op = string_attr(g.get(), "op", w, limits_);
  if (!has_attr(g.get(), "dtype", w)) bad(w, "attribute 'dtype'", "missing");
  s.dtype = string_attr(g.get(), "dtype", w, limits_);
  s.index_dtype = has_attr(g.get(), "index_dtype", w) ? string_attr(g.get(), "index_dtype", w, limits_) : "int64";
  return s;
}

bool GoldenFile::allows_vocab_parallel(const std::string& name) const {
  const Where w{path_, name};
  const CaseSummary s = summary(name);
  if (s.op != "cross_entropy" && s.op != "fused_linear_cross_entropy") return vocab_parallel_allowed(s.op, false);
  Handle cases = open_group(file_.get(), "cases", w, "group '/cases'");
  Handle g = open_group(cases.get(), name, w, "group");
  Handle in = open_group(g.get(), "inputs", w, "group 'inputs'");
  DatasetInfo t = inspect(in.get(), "target", "dataset 'inputs/target'", w, Kind::either, limits_);
  return vocab_parallel_allowed(s.op, t.integer);
}

Case GoldenFile::read_case(const std::string& name) const { return read(name, nullptr); }

Case GoldenFile::read_case_vocab(const std::string& name, int rank, int size) const {
  const int rs[2] = {rank, size};
  return read(name, rs);
}

Case GoldenFile::read(const std::string& name, const int* rank_size) const {
  const Where w{path_, name};
  Case c;
  c.file = path_;
  c.name = name;
  Handle cases = open_group(file_.get(), "cases", w, "group '/cases'");
  Handle g = open_group(cases.get(), name, w, "group");

  // Attributes: op, dtype, index_dtype, rtol, atol; every other one is an option.
  for (const char* req : {"op", "dtype", "rtol", "atol"})
    if (!has_attr(g.get(), req, w)) bad(w, impl::concat("attribute '", req, "'"), "missing");
  c.call.op = string_attr(g.get(), "op", w, limits_);
  const std::string dtype = string_attr(g.get(), "dtype", w, limits_);
  if (dtype != "float32" && dtype != "float64" && dtype != "float16" && dtype != "bfloat16")
    throw NotImplemented(
        impl::concat("kloss::golden: ", path_, ": case '", name, "': attribute 'dtype': '", dtype,
                     "' is not a floating dtype kloss implements (float32, float64, float16, bfloat16)"));
  c.call.dtype = rt::parse_dtype(dtype);
  if (has_attr(g.get(), "index_dtype", w)) {
    const std::string idt = string_attr(g.get(), "index_dtype", w, limits_);
    if (idt != "int32" && idt != "int64")
      throw NotImplemented(impl::concat("kloss::golden: ", path_, ": case '", name, "': attribute 'index_dtype': '",
                                        idt, "' is not an index dtype kloss implements (int32, int64)"));
    c.call.index_dtype = rt::parse_dtype(idt);
  }
  c.rtol = real_attr(g.get(), "rtol", w, limits_);
  c.atol = real_attr(g.get(), "atol", w, limits_);
  if (!(c.rtol >= 0) || !std::isfinite(c.rtol)) bad(w, "attribute 'rtol'", "must be finite and >= 0, got ", c.rtol);
  if (!(c.atol >= 0) || !std::isfinite(c.atol)) bad(w, "attribute 'atol'", "must be finite and >= 0, got ", c.atol);
  for (const auto& a : attribute_names(g.get(), w)) {
    if (not_options.count(a)) continue;
    c.call.options.set(a, read_attr(g.get(), a, w, limits_));
  }

  Handle in = open_group(g.get(), "inputs", w, "group 'inputs'");
  Handle ex = open_group(g.get(), "expected", w, "group 'expected'");
  const std::vector<std::string> in_names = link_names(in.get(), w, "group 'inputs'");
  const std::vector<std::string> ex_names = link_names(ex.get(), w, "group 'expected'");

  // Vocabulary-parallel: which inputs are sliced, along which axis.
  std::map<std::string, Slice> slices;
  if (rank_size) {
    const std::string& op = c.call.op;
    bool int_target = false;
    if (op == "cross_entropy" || op == "fused_linear_cross_entropy") {
      int_target = inspect(in.get(), "target", "dataset 'inputs/target'", w, Kind::either, limits_).integer;
    }
    if (!vocab_parallel_allowed(op, int_target))
      throw NotImplemented(impl::concat(
          "kloss::golden: ", path_, ": case '", name, "': op '", op, "'",
          op == "cross_entropy" || op == "fused_linear_cross_entropy" ? " with class-probability targets" : "",
          " cannot run vocabulary-parallel (docs/golden-schema.md)"));
    const std::string ref = op == "cross_entropy" ? "input" : "weight";
    DatasetInfo r = inspect(in.get(), ref, "dataset 'inputs/" + ref + "'", w, Kind::floating, limits_);
    const auto axes = vocab_axes(op, r.shape.rank);
    const int ax = axes.at(ref);
    if (r.shape.rank <= ax || (op != "cross_entropy" && r.shape.rank != 2))
      bad(w, "dataset 'inputs/" + ref + "'", "shape ", r.shape.str(), " has no vocabulary axis");
    const VocabRange range = vocab_split(r.shape.extent[ax], rank_size[0], rank_size[1]);
    c.vocab = range;
    for (const auto& [arg, axis] : axes) slices[arg] = Slice{axis, range};
  }
  auto slice_of = [&](const std::string& arg) -> std::optional<Slice> {
    auto it = slices.find(arg);
    if (it == slices.end()) return std::nullopt;
    return it->second;
  };

  std::map<std::string, Shape> in_shapes;
  for (const auto& arg : in_names) {
    const std::string item = "dataset 'inputs/" + arg + "'";
    Data d = read_dataset(in.get(), arg, item, w, arg_kind(c.call.op, arg), limits_,
                          arg == "grad_output" ? std::nullopt : slice_of(arg));
    if (arg == "grad_output") {
      c.call.grad_output = rt::Buffer::from_doubles(c.call.dtype, d.shape, d.reals);
      continue;
    }
    in_shapes[arg] = d.shape;
    try {
      c.call.inputs[arg] = d.integer ? rt::Buffer::from_int64(c.call.index_dtype, d.shape, d.ints)
                                     : rt::Buffer::from_doubles(c.call.dtype, d.shape, d.reals);
    } catch (const Error& e) {
      bad(w, item, "cannot convert to ", rt::to_string(d.integer ? c.call.index_dtype : c.call.dtype), ": ", e.what());
    }
  }

  // Expected output and gradients.
  if (std::find(ex_names.begin(), ex_names.end(), "output") == ex_names.end())
    bad(w, "dataset 'expected/output'", "missing dataset");
  {
    Data d = read_dataset(ex.get(), "output", "dataset 'expected/output'", w, Kind::floating, limits_);
    c.output = Expected{d.shape, std::move(d.reals)};
  }
  if (c.call.options.has("reduction")) {
    const auto& v = c.call.options.values().at("reduction");
    const std::string* red = std::get_if<std::string>(&v);
    if (!red) bad(w, "attribute 'reduction'", "must be a string");
    if (*red != "none" && c.output.shape.rank != 0)
      bad(w, "dataset 'expected/output'", "a reduced output (reduction '", *red,
          "') must be a scalar dataset (rank 0), got shape ", c.output.shape.str());
  }
  for (const auto& e : ex_names) {
    if (e.rfind("grad_", 0) != 0) continue;  // other datasets are extensions a reader may ignore
    const std::string arg = e.substr(5), item = "dataset 'expected/" + e + "'";
    auto it = in_shapes.find(arg);
    if (it == in_shapes.end()) bad(w, item, "gradient of '", arg, "', which is not among the inputs");
    Data d = read_dataset(ex.get(), e, item, w, Kind::floating, limits_, slice_of(arg));
    if (!(d.shape == it->second))
      bad(w, item, "shape ", d.shape.str(), " differs from inputs/", arg, "'s ", it->second.str());
    c.grads[arg] = Expected{d.shape, std::move(d.reals)};
  }
  if (!c.grads.empty()) {
    if (!c.call.grad_output) bad(w, "dataset 'inputs/grad_output'", "missing, but the case has expected gradients");
    if (!(c.call.grad_output->shape() == c.output.shape))
      bad(w, "dataset 'inputs/grad_output'", "shape ", c.call.grad_output->shape().str(),
          " differs from expected/output's ", c.output.shape.str());
  } else {
    c.call.grad_output.reset();  // forward-only case: no backward run
  }
  return c;
}

}  // namespace kloss::golden
