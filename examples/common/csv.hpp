// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The head of every CSV an example writes: the build's configuration
// (kloss::configuration(): kloss's version and git hash, Kokkos' version and
// execution spaces, the product libraries, MPI, HDF5) and the run's own
// facts (its command line, its MPI ranks), one `# key: value` line each,
// before the header row. Readers skip lines that start with '#'
// (examples/plot.py does; pandas: read_csv(..., comment="#")).
#include <kloss/version.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace kloss_examples {

using Facts = std::vector<std::pair<std::string, std::string>>;

/// Writes kloss::configuration() and then `run` as `# key: value` lines
/// (a line break inside a value becomes a blank, so that each stays one
/// comment line).
inline void write_csv_preamble(std::ostream& os, const Facts& run) {
  auto line = [&os](const std::string& key, std::string value) {
    for (char& c : value)
      if (c == '\n' || c == '\r') c = ' ';
    os << "# " << key << ": " << value << "\n";
  };
  for (const auto& [key, value] : kloss::configuration()) line(key, value);
  for (const auto& [key, value] : run) line(key, value);
}

}  // namespace kloss_examples
