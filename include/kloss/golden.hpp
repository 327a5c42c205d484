// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file golden.hpp
/// Golden-case files (the `kloss-golden/1` HDF5 schema, docs/golden-schema.md
/// and docs/validation.md): reading a case into an rt::Call plus its
/// expected values, running it through the registry and comparing, as
/// kloss-validate does. Also the balanced vocabulary split of
/// vocabulary-parallel runs, and RAII owners of HDF5 identifiers.
///
/// Every failure to read throws kloss::Hdf5Error whose message names the
/// file, the case and the item ("kloss::golden: f.h5: case 'c': dataset
/// 'inputs/target': ..."). HDF5's own error-stack printing is switched off
/// by the first GoldenFile opened (silence_hdf5_errors()).
#include <kloss/config.hpp>
#include <cstdint>
#include <functional>
#include <kloss/error.hpp>
#include <kloss/runtime.hpp>
#include <kloss/vocab_range.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#ifdef KLOSS_HAVE_HDF5
#include <hdf5.h>
#endif
#ifdef KLOSS_HAVE_MPI
#include <mpi.h>
#endif

// The whole golden-file API exists when kloss is built with HDF5
// (KLOSS_ENABLE_HDF5, which defines KLOSS_HAVE_HDF5).
#ifdef KLOSS_HAVE_HDF5
namespace kloss::golden {

/// The schema version this reader implements (the root `schema` attribute).
inline constexpr std::string_view schema_version = "kloss-golden/1";

/// A rank's share of the vocabulary and the schema's balanced split
/// (kloss/vocab_range.hpp).
using kloss::VocabRange;
using kloss::vocab_split;

/// Whether the schema allows a case vocabulary-parallel: cross_entropy with
/// class-index (integer) targets, fused_linear_cross_entropy (class-index
/// targets; its probability targets are kloss's extension), embedding.
/// `integer_target`: whether the case's inputs/target is an integer dataset.
bool vocab_parallel_allowed(std::string_view op, bool integer_target);

/// Expected values of one output or gradient, in float64, with its shape.
struct Expected {
  Shape shape;                 ///< the extents
  std::vector<double> values;  ///< the values, row-major
};

/// One golden case as read from a file.
struct Case {
  std::string file;  ///< the file it came from (for messages)
  std::string name;  ///< the group name under /cases
  rt::Call call;     ///< op, dtype, index dtype, inputs converted, options, grad_output
  ///@{
  /// The case's tolerances (Comparison).
  double rtol = 0, atol = 0;
  ///@}
  Expected output;                        ///< expected/output
  std::map<std::string, Expected> grads;  ///< `expected/grad_<arg>`, keyed by `<arg>`
  /// Set for a vocabulary-parallel read: the rows of the vocabulary this
  /// rank holds; the vocabulary-sized inputs in `call` and the expected
  /// gradients of those inputs hold only these rows.
  std::optional<VocabRange> vocab;
};

/// What --list shows of a case, read from its attributes only.
struct CaseSummary {
  ///@{
  /// The group name under /cases, and the attributes of these names.
  std::string name, op, dtype, index_dtype;
  ///@}
};

/// Limits that protect the reader from hostile files.
struct ReadLimits {
  /// Largest element count of one dataset; larger ones are refused before
  /// anything is allocated.
  std::int64_t max_elements = std::int64_t(1) << 28;
  /// Longest string attribute, in bytes.
  std::size_t max_string = 1 << 16;
};

/// Comparison of got against expected under
/// abs(got - exp) <= atol + rtol * abs(exp) (NaN only matches NaN, an
/// infinity only the same infinity).
struct Comparison {
  bool ok = true;               ///< every element within the tolerance, and the shapes equal
  double max_abs_err = 0;       ///< over elements where both are finite
  double max_rel_err = 0;       ///< max abs err / abs(exp) over finite, nonzero exp
  std::int64_t mismatches = 0;  ///< elements outside the tolerance
  std::string reason;           ///< empty when ok
};

/// Compares element-wise; a shape difference is a mismatch with a reason.
Comparison compare(std::string_view item, const Shape& got_shape, const std::vector<double>& got, const Expected& exp,
                   double rtol, double atol);

/// The outcome of one case.
struct CaseReport {
  ///@{
  /// The case's group name, op and dtype.
  std::string name, op, dtype;
  ///@}
  bool passed = false;  ///< output and every expected gradient within tolerance
  ///@{
  /// The largest errors over everything compared (Comparison).
  double max_abs_err = 0, max_rel_err = 0;
  ///@}
  std::string reason;  ///< why it failed; empty when it passed
};

/// Runs a case through kloss::rt::run and compares its output and every
/// expected gradient. Never throws for a kloss::Error or std::exception of
/// the op: that is a failed report with the message as the reason.
CaseReport run_case(const Case& c);

/// Compares a result with a case's expectations (output, then every
/// expected gradient; an expected gradient the result lacks fails).
CaseReport check_result(const Case& c, const rt::Result& r);

/// Switches off HDF5's automatic printing of its error stack (process-wide;
/// kloss reports HDF5 failures as exceptions instead).
void silence_hdf5_errors();

/// RAII owner of one HDF5 identifier (file, group, dataset, attribute,
/// dataspace, datatype or property list); closes it with the matching
/// H5?close. Movable, not copyable.
class Handle {
 public:
  Handle() = default;
  /// Takes ownership of `id` (a negative id: none).
  explicit Handle(hid_t id) : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  /// Takes over `o`'s identifier; `o` holds none.
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  /// Closes this identifier, then takes over `o`'s.
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  ~Handle() { reset(); }
  hid_t get() const { return id_; }                   ///< the identifier (negative: none)
  bool valid() const { return id_ >= 0; }             ///< holds an identifier
  explicit operator bool() const { return valid(); }  ///< valid()
  /// Closes the identifier now (errors ignored: a destructor cannot report).
  void reset() noexcept;
  /// Gives up ownership without closing.
  hid_t release() noexcept {
    const hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

/// An open golden file. Construction opens it read-only and checks the
/// root `schema` attribute; every error names the file.
class GoldenFile {
 public:
  /// Opens `path` with the default (POSIX) driver.
  explicit GoldenFile(const std::string& path, ReadLimits limits = {});
  /// Opens an in-memory file image (copied); `label` names it in messages.
  static GoldenFile from_image(const void* data, std::size_t size, const std::string& label, ReadLimits limits = {});
#ifdef KLOSS_HAVE_MPI
  /// Opens `path` for parallel reads with the MPI-IO driver. Collective over
  /// `comm`, as are the destructor and read_case_vocab.
  GoldenFile(const std::string& path, MPI_Comm comm, ReadLimits limits = {});
#endif
  GoldenFile(GoldenFile&&) = default;             ///< movable
  GoldenFile& operator=(GoldenFile&&) = default;  ///< movable

  const std::string& path() const { return path_; }  ///< the path (or label) it was opened with
  /// The names of the groups under /cases, in HDF5 name order.
  const std::vector<std::string>& case_names() const { return names_; }
  /// The case's attributes op, dtype and index_dtype.
  CaseSummary summary(const std::string& name) const;
  /// Reads case `name` whole. Throws Hdf5Error (malformed file: names the
  /// file, case and item) or NotImplemented (a dtype kloss lacks).
  Case read_case(const std::string& name) const;
  /// Reads case `name` for a vocabulary-parallel run as rank `rank` of
  /// `size`: the vocabulary-sized inputs and their expected gradients only
  /// for this rank's rows (hyperslab reads); everything else whole. Throws
  /// NotImplemented when the schema does not allow the case
  /// vocabulary-parallel.
  Case read_case_vocab(const std::string& name, int rank, int size) const;
  /// Whether the schema allows case `name` vocabulary-parallel (reads its
  /// `op` attribute and the type of inputs/target). Throws Hdf5Error.
  bool allows_vocab_parallel(const std::string& name) const;

 private:
  GoldenFile(std::string path, ReadLimits limits, int /*private tag*/) : path_(std::move(path)), limits_(limits) {}
  void init();
  Case read(const std::string& name, const int* rank_size) const;
  std::string path_;
  ReadLimits limits_;
  Handle file_;
  std::vector<std::string> names_;
};

/// One case to write (tests, tools): the mirror of Case, with integer
/// inputs given separately. Strings are written as variable-length UTF-8
/// (as h5py does).
struct CaseToWrite {
  ///@{
  /// The group name under /cases, and the attributes of these names.
  std::string name, op, dtype;
  ///@}
  std::optional<std::string> index_dtype;  ///< the index_dtype attribute, when the op has index inputs
  ///@{
  /// The case's tolerances.
  double rtol = 1e-12, atol = 1e-12;
  ///@}
  std::map<std::string, rt::OptionValue> attributes;  ///< reduction and the other options
  std::map<std::string, Expected> float_inputs;       ///< includes grad_output when given
  /// Integer inputs (targets, indices): shape and values.
  std::map<std::string, std::pair<Shape, std::vector<std::int64_t>>> int_inputs;
  Expected output;                        ///< expected/output
  std::map<std::string, Expected> grads;  ///< `expected/grad_<arg>`, keyed by `<arg>`
};

/// Writes a golden file (truncating `path`). Throws Hdf5Error.
void write_golden_file(const std::string& path, const std::vector<CaseToWrite>& cases);

/// The report of one file: every case selected, or a file-level error.
struct FileReport {
  std::string path;               ///< the file
  std::string error;              ///< non-empty when the file could not be opened at all
  std::vector<CaseReport> cases;  ///< one per case selected
};

/// Reads and runs every case of `path` whose name `select` accepts (all if
/// empty); a case that cannot be read is a failed report naming the item.
/// Never throws.
FileReport validate_file(const std::string& path, const std::function<bool(const std::string&)>& select = {},
                         ReadLimits limits = {});
/// The same for an open file.
std::vector<CaseReport> validate_cases(const GoldenFile& f, const std::function<bool(const std::string&)>& select = {});

#ifdef KLOSS_HAVE_MPI
/// Vocabulary-parallel validation of the selected cases of `f` (opened
/// with the MPI constructor on `comm`) that the schema allows
/// vocabulary-parallel: each rank reads its slice, calls the op's
/// run_vocab_parallel with a VocabShard on `comm`, and checks its output
/// and gradient slices; the ranks agree on every verdict (the reason and
/// the largest errors of any rank), so the reports are identical on every
/// rank. `skipped` (if given) counts the selected cases not allowed.
/// Collective over `comm`; never throws for a bad case.
std::vector<CaseReport> validate_cases_vocab_parallel(const GoldenFile& f, MPI_Comm comm,
                                                      const std::function<bool(const std::string&)>& select = {},
                                                      int* skipped = nullptr);
#endif

}  // namespace kloss::golden
#endif  // KLOSS_HAVE_HDF5
