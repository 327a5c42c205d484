// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Figures of the examples: a program writes its CSV, then plot() runs
// examples/plot.py (matplotlib: Debian's python3-matplotlib, which
// scripts/setup-debian.sh installs) on it. The interpreter is
// /usr/bin/python3 unless KLOSS_PYTHON names another; the script is found
// in the examples' source directory (KLOSS_EXAMPLES_DIR, which
// examples/CMakeLists.txt defines).
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kloss_examples {

/// `s` as one single-quoted shell word.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Draws figure `kind` ("sim_surrogate", "lm_head", "scaling") from `csv`
/// into `png`, with `note` (the run's settings) under its title. Returns
/// whether the PNG was written; says why not otherwise.
inline bool plot(const std::string& kind, const std::string& csv, const std::string& png,
                 const std::string& note = "") {
  const char* py = std::getenv("KLOSS_PYTHON");
  const std::string cmd = shell_quote(py && *py ? py : "/usr/bin/python3") + " " +
                          shell_quote(KLOSS_EXAMPLES_DIR "/plot.py") + " " + kind + " " + shell_quote(csv) + " " +
                          shell_quote(png) + (note.empty() ? "" : " " + shell_quote(note));
  std::fflush(stdout);
  const int rc = std::system(cmd.c_str());
  if (rc != 0)
    std::printf("(no %s: the plot command failed; figures need python3 with matplotlib: %s)\n", png.c_str(),
                cmd.c_str());
  return rc == 0;
}

}  // namespace kloss_examples
