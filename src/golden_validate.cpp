// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Validation of golden files: every selected case read, run and compared,
// serially, and vocabulary-parallel under MPI with every rank's verdict
// agreed.
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
// --- validation -----------------------------------------------------------------
namespace {
CaseReport failed(const std::string& name, std::string op, std::string dtype, const std::string& reason) {
  CaseReport r;
  r.name = name;
  r.op = std::move(op);
  r.dtype = std::move(dtype);
  r.reason = reason;
  return r;
}

// op and dtype for a report of a case that could not be read.
void best_effort_summary(const GoldenFile& f, const std::string& name, std::string& op, std::string& dtype) {
  op = "?";
  dtype = "?";
  try {
    auto s = f.summary(name);
    op = s.op;
    dtype = s.dtype;
  } catch (const std::exception&) {
  }
}
}  // namespace

std::vector<CaseReport> validate_cases(const GoldenFile& f, const std::function<bool(const std::string&)>& select) {
  std::vector<CaseReport> out;
  for (const auto& name : f.case_names()) {
    if (select && !select(name)) continue;
    try {
      out.push_back(run_case(f.read_case(name)));
    } catch (const std::exception& e) {
      std::string op, dtype;
      best_effort_summary(f, name, op, dtype);
      out.push_back(failed(name, op, dtype, e.what()));
    }
  }
  return out;
}

FileReport validate_file(const std::string& path, const std::function<bool(const std::string&)>& select,
                         ReadLimits limits) {
  FileReport r;
  r.path = path;
  try {
    GoldenFile f(path, limits);
    r.cases = validate_cases(f, select);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

#ifdef KLOSS_HAVE_MPI
namespace {

// The verdict of every rank on one case, made identical on all ranks: the
// first failing rank's reason and the largest errors of any rank.
CaseReport agree(CaseReport local, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int mine = local.passed ? size : rank, first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  double errs[2] = {local.max_abs_err, local.max_rel_err}, maxs[2] = {0, 0};
  MPI_Allreduce(errs, maxs, 2, MPI_DOUBLE, MPI_MAX, comm);
  local.max_abs_err = maxs[0];
  local.max_rel_err = maxs[1];
  if (first == size) {
    local.passed = true;
    local.reason.clear();
    return local;
  }
  std::string reason = local.reason;
  long long len = static_cast<long long>(reason.size());
  MPI_Bcast(&len, 1, MPI_LONG_LONG, first, comm);
  reason.resize(static_cast<std::size_t>(len));
  if (len > 0) MPI_Bcast(reason.data(), static_cast<int>(len), MPI_CHAR, first, comm);
  local.passed = false;
  // Rank 0 prints the report: say when the reason is another rank's.
  local.reason = (first != 0 ? impl::concat("rank ", first, ": ") : std::string()) + reason;
  return local;
}

}  // namespace

std::vector<CaseReport> validate_cases_vocab_parallel(const GoldenFile& f, MPI_Comm comm,
                                                      const std::function<bool(const std::string&)>& select,
                                                      int* skipped) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (skipped) *skipped = 0;
  std::vector<CaseReport> out;
  // Every rank lists the same file; check rather than hope, so that no rank
  // waits in a collective the others never enter.
  long long n = static_cast<long long>(f.case_names().size()), nmin = 0, nmax = 0;
  MPI_Allreduce(&n, &nmin, 1, MPI_LONG_LONG, MPI_MIN, comm);
  MPI_Allreduce(&n, &nmax, 1, MPI_LONG_LONG, MPI_MAX, comm);
  if (nmin != nmax) throw MpiError("kloss::golden: " + f.path() + ": ranks see different numbers of cases");
  for (const auto& name : f.case_names()) {
    if (select && !select(name)) continue;
    std::string op = "?", dtype = "?";
    best_effort_summary(f, name, op, dtype);
    // Allowed? (a malformed case is a failure, agreed below)
    CaseReport local = failed(name, op, dtype, "");
    int allowed = 0;
    try {
      allowed = f.allows_vocab_parallel(name) ? 1 : 0;
    } catch (const std::exception& e) {
      allowed = 2;  // run it so that the read reports the problem
    }
    int allowed_all = 0;
    MPI_Allreduce(&allowed, &allowed_all, 1, MPI_INT, MPI_MAX, comm);
    if (allowed_all == 0) {
      if (skipped) ++*skipped;
      continue;
    }
    std::optional<Case> c;
    try {
      c = f.read_case_vocab(name, rank, size);
    } catch (const std::exception& e) {
      local.reason = e.what();
    }
    int read_ok = c ? 1 : 0, all_read = 0;
    MPI_Allreduce(&read_ok, &all_read, 1, MPI_INT, MPI_MIN, comm);
    if (!all_read) {
      if (c) local.reason = "another rank could not read the case";
      out.push_back(agree(local, comm));
      continue;
    }
    const OpInfo* info = find_op(c->call.op);
    if (!info) {
      local.reason = impl::concat("kloss::", c->call.op, ": no such op in kloss");
    } else if (!info->run_vocab_parallel) {
      local.reason =
          impl::concat("kloss::", c->call.op, ": op has no vocabulary-parallel entry point (run_vocab_parallel) yet");
    } else {
      try {
        VocabShard shard;
        shard.comm = comm;
        shard.begin = c->vocab->begin;
        shard.count = c->vocab->count;
        shard.total = c->vocab->total;
        rt::Result r = info->run_vocab_parallel(c->call, shard);
        c->call.options.check_all_used(c->call.op);
        local = check_result(*c, r);
      } catch (const std::exception& e) {
        local.reason = e.what();
      }
    }
    out.push_back(agree(local, comm));
  }
  return out;
}
#endif

}  // namespace kloss::golden
