// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss-validate: runs golden HDF5 cases (schema kloss-golden/1,
// docs/validation.md) through kloss's registry and reports per case.
//
//   kloss-validate [--filter REGEX] [--list] [--json FILE] FILE...
//   mpirun -np P kloss-validate --vocab-parallel [--filter REGEX] [--json FILE] FILE...
//   kloss-validate --help | --version
//
// One line per case (name, op, dtype, max abs err, max rel err, pass/FAIL and
// why), a line per unreadable file, and last exactly "N passed, M failed".
// Exit status 0 iff every case passed (and every file could be read), 1
// otherwise, 2 for a usage error.
#include <kloss/config.hpp>
#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <kloss/golden.hpp>
#include <kloss/registry.hpp>
#include <kloss/version.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#ifdef KLOSS_HAVE_MPI
#include <mpi.h>
#endif

namespace {

using kloss::golden::CaseReport;
using kloss::golden::FileReport;

void usage(std::ostream& os) {
  os << "usage: kloss-validate [--filter REGEX] [--list] [--json FILE] FILE...\n"
        "       mpirun -np P kloss-validate --vocab-parallel [--filter REGEX] [--json FILE] FILE...\n"
        "Runs every case of each golden HDF5 file (schema kloss-golden/1) through kloss\n"
        "and compares with the expected output and gradients.\n"
        "  --filter REGEX    only the cases whose name matches REGEX (ECMAScript, search)\n"
        "  --list            list the cases (name, op, dtype, index dtype) without running\n"
        "  --json FILE       also write the report as JSON to FILE\n"
        "  --vocab-parallel  run the cases the schema allows vocabulary-parallel with the\n"
        "                    vocabulary split over the MPI ranks (run under mpirun)\n"
        "  --help            this message\n"
        "  --version         kloss's version and the configuration it was built with\n"
        "Exit status: 0 iff every case passed, 1 otherwise, 2 for a usage error.\n";
}

std::string fmt_err(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The report line of one case.
std::string case_line(const CaseReport& c) {
  std::string s = c.name + "  " + c.op + "  " + c.dtype + "  max_abs_err=" + fmt_err(c.max_abs_err) +
                  "  max_rel_err=" + fmt_err(c.max_rel_err) + "  ";
  s += c.passed ? "pass" : "FAIL: " + c.reason;
  return s;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\t':
        o += "\\t";
        break;
      case '\r':
        o += "\\r";
        break;
      default:
        if (ch < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", ch);
          o += b;
        } else {
          o += static_cast<char>(ch);
        }
    }
  }
  return o + "\"";
}

std::string json_num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool write_json(const std::string& path, const std::vector<FileReport>& files, int passed, int failed, bool vocab) {
  std::ofstream os(path);
  if (!os) return false;
  // The build that produced the report: kloss::configuration() as strings.
  os << "{\n  \"kloss\": {";
  const auto config = kloss::configuration();
  for (std::size_t i = 0; i < config.size(); ++i)
    os << (i ? ", " : "") << json_str(config[i].first) << ": " << json_str(config[i].second);
  os << "},\n  \"schema\": " << json_str(std::string(kloss::golden::schema_version))
     << ",\n  \"vocab_parallel\": " << (vocab ? "true" : "false") << ",\n  \"files\": [";
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto& f = files[i];
    os << (i ? "," : "") << "\n    {\"path\": " << json_str(f.path)
       << ", \"error\": " << (f.error.empty() ? "null" : json_str(f.error)) << ", \"cases\": [";
    for (std::size_t j = 0; j < f.cases.size(); ++j) {
      const auto& c = f.cases[j];
      os << (j ? "," : "") << "\n      {\"name\": " << json_str(c.name) << ", \"op\": " << json_str(c.op)
         << ", \"dtype\": " << json_str(c.dtype) << ", \"passed\": " << (c.passed ? "true" : "false")
         << ", \"max_abs_err\": " << json_num(c.max_abs_err) << ", \"max_rel_err\": " << json_num(c.max_rel_err)
         << ", \"reason\": " << json_str(c.reason) << "}";
    }
    os << (f.cases.empty() ? "" : "\n    ") << "]}";
  }
  os << "\n  ],\n  \"passed\": " << passed << ",\n  \"failed\": " << failed << "\n}\n";
  return static_cast<bool>(os);
}

struct Args {
  std::vector<std::string> files;
  std::string filter, json;
  bool has_filter = false, list = false, vocab = false, help = false, version = false;
};

// Returns an error message, empty on success.
std::string parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    if (s == "--filter") {
      if (!value(a.filter)) return "--filter needs a REGEX";
      a.has_filter = true;
    } else if (s.rfind("--filter=", 0) == 0) {
      a.filter = s.substr(9);
      a.has_filter = true;
    } else if (s == "--json") {
      if (!value(a.json)) return "--json needs a FILE";
    } else if (s.rfind("--json=", 0) == 0) {
      a.json = s.substr(7);
    } else if (s == "--list") {
      a.list = true;
    } else if (s == "--vocab-parallel") {
      a.vocab = true;
    } else if (s == "-h" || s == "--help") {
      a.help = true;
    } else if (s == "--version") {
      a.version = true;
    } else if (s == "--") {
      for (++i; i < argc; ++i) a.files.push_back(argv[i]);
    } else if (s.rfind("--kokkos-", 0) == 0) {
      // for Kokkos::ScopeGuard
    } else if (!s.empty() && s[0] == '-') {
      return "unknown option '" + s + "'";
    } else {
      a.files.push_back(s);
    }
  }
  if (!a.help && !a.version && a.files.empty()) return "no FILE given";
  if (a.vocab && a.list) return "--list and --vocab-parallel do not go together";
  return {};
}

int list_cases(const Args& a, const std::function<bool(const std::string&)>& select) {
  int bad = 0;
  for (const auto& path : a.files) {
    try {
      kloss::golden::GoldenFile f(path);
      for (const auto& name : f.case_names()) {
        if (select && !select(name)) continue;
        try {
          auto s = f.summary(name);
          std::cout << path << "  " << s.name << "  " << s.op << "  " << s.dtype << "  " << s.index_dtype << "\n";
        } catch (const std::exception& e) {
          std::cout << path << "  " << name << "  ERROR: " << e.what() << "\n";
          ++bad;
        }
      }
    } catch (const std::exception& e) {
      std::cout << path << "  ERROR: " << e.what() << "\n";
      ++bad;
    }
  }
  return bad ? 1 : 0;
}

// Prints the report (on the calling rank) and returns the exit status.
int report(const Args& a, const std::vector<FileReport>& files, int skipped) {
  int passed = 0, failed = 0;
  for (const auto& f : files) {
    if (!f.error.empty()) {
      std::cout << f.path << ": FAIL: " << f.error << "\n";
      ++failed;  // an unreadable file counts as one failure
      continue;
    }
    std::cout << "== " << f.path << " (" << f.cases.size() << " case" << (f.cases.size() == 1 ? "" : "s") << ")\n";
    for (const auto& c : f.cases) {
      std::cout << case_line(c) << "\n";
      (c.passed ? passed : failed)++;
    }
  }
  if (a.vocab) std::cout << "(" << skipped << " selected case(s) not vocabulary-parallel by the schema, not run)\n";
  std::cout << passed << " passed, " << failed << " failed" << std::endl;
  if (!a.json.empty() && !write_json(a.json, files, passed, failed, a.vocab)) {
    std::cerr << "kloss-validate: cannot write " << a.json << "\n";
    return 1;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  const std::string err = parse(argc, argv, a);
  if (a.help) {
    usage(std::cout);
    return 0;
  }
  if (a.version && err.empty()) {
    std::cout << "kloss-validate " << kloss::version() << "\n";
    kloss::print_configuration(std::cout);
    return 0;
  }
  if (!err.empty()) {
    std::cerr << "kloss-validate: " << err << "\n";
    usage(std::cerr);
    return 2;
  }
  std::function<bool(const std::string&)> select;
  std::regex re;
  if (a.has_filter) {
    try {
      re = std::regex(a.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      std::cerr << "kloss-validate: bad --filter '" << a.filter << "': " << e.what() << "\n";
      return 2;
    }
    select = [&re](const std::string& name) { return std::regex_search(name, re); };
  }
  if (a.list) return list_cases(a, select);

  if (!a.vocab) {
    int status = 0;
    {
      Kokkos::ScopeGuard guard(argc, argv);
      std::vector<FileReport> files;
      for (const auto& path : a.files) files.push_back(kloss::golden::validate_file(path, select));
      status = report(a, files, 0);
    }
    return status;
  }

#ifndef KLOSS_HAVE_MPI
  std::cerr << "kloss-validate: --vocab-parallel needs kloss built with MPI (KLOSS_ENABLE_MPI)\n";
  return 2;
#else
  MPI_Init(&argc, &argv);
  int status = 0;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    // The ops get their own communicator, as the library would from a caller.
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    std::vector<FileReport> files;
    int skipped_total = 0;
    for (const auto& path : a.files) {
      FileReport fr;
      fr.path = path;
      try {
        kloss::golden::GoldenFile f(path, comm);
        int skipped = 0;
        fr.cases = kloss::golden::validate_cases_vocab_parallel(f, comm, select, &skipped);
        skipped_total += skipped;
      } catch (const std::exception& e) {
        fr.error = e.what();
      }
      files.push_back(std::move(fr));
    }
    // File-level errors are decided collectively (GoldenFile's MPI
    // constructor agrees across ranks), so rank 0's report is everyone's.
    if (rank == 0) status = report(a, files, skipped_total);
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&comm);
  }
  MPI_Finalize();
  return status;
#endif
}
