#pragma once
// Command lines of the examples: each names its arguments once, as a list
// of option(name, variable) and flag(name, action), and parse_args reads
// argv against it.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "progress.hpp"

namespace kloss_examples {

/// What an argument sets: the variable whose value follows it (read with
/// std::stoi, std::stoll or std::stod, or as it is), or, for a flag, the
/// action it takes.
using ArgTarget = std::variant<int*, std::int64_t*, double*, std::string*, std::function<void()>>;
using Arg = std::pair<std::string, ArgTarget>;

/// "name value": the value goes to `v`.
template <class T>
Arg option(const std::string& name, T& v) {
  return {name, &v};
}

/// "name" alone: runs `action`.
inline Arg flag(const std::string& name, std::function<void()> action) { return {name, std::move(action)}; }

/// Parses argv[1..argc) in order, so that a later argument overrides an
/// earlier one: an argument of `args` sets its variable from the next one
/// (a missing value reads as "") or takes its action; with `log`, the
/// progress options (LogOptions::parse) go to it. Any other argument is
/// passed over.
inline void parse_args(int argc, char** argv, const std::vector<Arg>& args, LogOptions* log = nullptr) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (log && log->parse(argc, argv, i)) continue;
    for (const auto& [name, target] : args) {
      if (name != s) continue;
      if (const auto* action = std::get_if<std::function<void()>>(&target)) {
        (*action)();
        break;
      }
      const std::string v = i + 1 < argc ? argv[++i] : "";
      if (auto* p = std::get_if<int*>(&target)) **p = std::stoi(v);
      if (auto* p = std::get_if<std::int64_t*>(&target)) **p = std::stoll(v);
      if (auto* p = std::get_if<double*>(&target)) **p = std::stod(v);
      if (auto* p = std::get_if<std::string*>(&target)) **p = v;
      break;
    }
  }
}

}  // namespace kloss_examples
