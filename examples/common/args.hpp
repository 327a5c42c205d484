// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Command lines of the examples. A program names its arguments once, as a
// Command holding option(name, variable), flag(name, action) and
// positional(name, variable) entries with their help, and parse_args reads
// argv against it and writes the usage message from it.
//
// Every program answers --help (the usage on stdout, exit status 0) and
// --version (the program's name and kloss::print_configuration on stdout,
// status 0). An unknown option (`--step 100`), a missing or malformed value
// (`--steps abc`, `--steps 1e3`), a value below an option's least, or an
// argument the program does not take prints what was wrong and the usage
// to stderr: status 2. parse_args never exits: it returns the status, so
// that an MPI program finalises MPI on every rank and returns it; every
// rank parses the same argv and so reaches the same verdict, and only the
// rank told to print does. Kokkos' own options (--kokkos-...) are passed
// over, for Kokkos::initialize.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <kloss/version.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "progress.hpp"

namespace kloss_examples {

/// What an argument sets: the variable its value is read into (an integer,
/// a finite number or a string, the whole value or it is malformed), a
/// setter taking the value (which returns false for a value it refuses), or,
/// for a flag, the action it takes.
using ArgTarget = std::variant<int*, std::int64_t*, double*, std::string*, std::function<bool(const std::string&)>,
                               std::function<void()>>;

/// One argument: "--name VALUE" (or "--name=VALUE"), a flag "--name", or a
/// positional argument (its `name` is what the usage calls it).
struct Arg {
  std::string name;
  std::string metavar;  ///< what the value is called in the usage ("N", "DIR"); empty for a flag
  std::string help;
  ArgTarget target;
  std::string default_text;  ///< shown as "(default: ...)"; empty: not shown
  std::optional<double> least;
  bool positional = false;

  /// Values below `v` are refused (numeric options).
  Arg& at_least(double v) {
    least = v;
    return *this;
  }
  /// The default as the usage shows it, where the variable's initial value
  /// does not say it (a 0 that means "chosen from the other options").
  Arg& shown_default(std::string text) {
    default_text = std::move(text);
    return *this;
  }
};

namespace detail {
inline std::string text_of(int v) { return std::to_string(v); }
inline std::string text_of(std::int64_t v) { return std::to_string(v); }
inline std::string text_of(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
inline std::string text_of(const std::string& v) { return v; }
}  // namespace detail

/// "name VALUE": the value goes to `v`, whose value now is the default the
/// usage shows.
template <class T>
Arg option(std::string name, T& v, std::string metavar, std::string help) {
  return Arg{std::move(name), std::move(metavar), std::move(help), &v, detail::text_of(v), {}, false};
}

/// "name VALUE": `set(value)` takes it, or returns false to refuse it.
inline Arg option(std::string name, std::function<bool(const std::string&)> set, std::string metavar, std::string help,
                  std::string default_text = "") {
  return Arg{std::move(name), std::move(metavar), std::move(help), std::move(set), std::move(default_text), {}, false};
}

/// "name" alone: runs `action`.
inline Arg flag(std::string name, std::function<void()> action, std::string help) {
  return Arg{std::move(name), "", std::move(help), std::move(action), "", {}, false};
}

/// An optional positional argument: the first argument that is not an
/// option goes to `v`.
inline Arg positional(std::string name, std::string& v, std::string help) {
  return Arg{std::move(name), "", std::move(help), &v, v, {}, true};
}

/// The progress options of examples/common/progress.hpp, into `log`.
inline std::vector<Arg> log_args(LogOptions& log) {
  return {
      option(
          "--progress",
          [&log](const std::string& v) {
            if (v == "auto")
              log.mode = LogOptions::Mode::automatic;
            else if (v == "bar")
              log.mode = LogOptions::Mode::bar;
            else if (v == "lines")
              log.mode = LogOptions::Mode::lines;
            else
              return false;
            return true;
          },
          "auto|bar|lines", "a bar redrawn in place, or lines; auto: the bar on a terminal outside an MPI launcher",
          "auto"),
      option("--log-every", log.every, "N", "in lines mode, a line every N steps")
          .at_least(1)
          .shown_default("total/20"),
      flag(
          "--log-all-ranks", [&log] { log.all_ranks = true; }, "every rank prints, its lines prefixed [rank r]"),
  };
}

/// A program's command line.
struct Command {
  std::string program;   ///< its name, as the usage writes it
  std::string synopsis;  ///< what comes before the options in the usage line, e.g. "mpirun -np P "
  std::string summary;   ///< what it does, a line or two
  std::vector<Arg> args;
  /// Checks of the values together, after parsing: returns what is wrong,
  /// or "" if nothing is.
  std::function<std::string()> check;
};

/// The usage message of `cmd`.
inline std::string usage(const Command& cmd) {
  std::string line = "usage: " + cmd.synopsis + cmd.program + " [options]";
  for (const auto& a : cmd.args)
    if (a.positional) line += " [" + a.name + "]";
  std::string s = line + "\n" + cmd.summary + "\n\n";
  auto entry = [&s](const std::string& left, const std::string& help, const std::string& def) {
    std::string l = "  " + left;
    l += l.size() < 26 ? std::string(26 - l.size(), ' ') : "\n" + std::string(26, ' ');
    s += l + help + (def.empty() ? "" : " (default: " + def + ")") + "\n";
  };
  bool first = true;
  for (const auto& a : cmd.args)
    if (a.positional) {
      s += first ? "arguments:\n" : "";
      first = false;
      entry(a.name, a.help, a.default_text);
    }
  s += first ? "options:\n" : "\noptions:\n";
  for (const auto& a : cmd.args)
    if (!a.positional) entry(a.name + (a.metavar.empty() ? "" : " " + a.metavar), a.help, a.default_text);
  entry("--help", "this message", "");
  entry("--version", "kloss's version and the configuration it was built with", "");
  s += "Kokkos' options (--kokkos-...) go to Kokkos.\n";
  return s;
}

/// The command line as one string (arguments with blanks or quotes quoted),
/// for the head of the files a program writes.
inline std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.empty() || a.find_first_of(" \t\"'\\$") != std::string::npos) {
      std::string q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      a = q + "'";
    }
    s += (i ? " " : "") + a;
  }
  return s;
}

namespace detail {

// Reads `v` whole into `out`; false if it is not one value of the type.
template <class Int>
bool read_int(const std::string& v, Int& out) {
  const char* end = v.data() + v.size();
  const auto [p, ec] = std::from_chars(v.data(), end, out);
  return ec == std::errc() && p == end && !v.empty();
}

inline bool read_double(const std::string& v, double& out) {
  if (v.empty() || std::isspace(static_cast<unsigned char>(v[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v.c_str(), &end);
  if (errno != 0 || end != v.c_str() + v.size() || !std::isfinite(d)) return false;
  out = d;
  return true;
}

// Sets `a` from `v`: "" on success, else what is wrong.
inline std::string assign(const Arg& a, const std::string& v) {
  const std::string& who = a.name;
  double value = 0;  // of a numeric option, for its least
  if (auto* p = std::get_if<int*>(&a.target)) {
    if (!read_int(v, **p)) return who + " needs an integer, got '" + v + "'";
    value = **p;
  } else if (auto* p = std::get_if<std::int64_t*>(&a.target)) {
    if (!read_int(v, **p)) return who + " needs an integer, got '" + v + "'";
    value = static_cast<double>(**p);
  } else if (auto* p = std::get_if<double*>(&a.target)) {
    if (!read_double(v, **p)) return who + " needs a finite number, got '" + v + "'";
    value = **p;
  } else if (auto* p = std::get_if<std::string*>(&a.target)) {
    **p = v;
    return "";
  } else if (auto* set = std::get_if<std::function<bool(const std::string&)>>(&a.target)) {
    return (*set)(v) ? "" : who + " must be " + a.metavar + ", got '" + v + "'";
  }
  if (a.least && value < *a.least) return who + " must be at least " + text_of(*a.least) + ", got " + v;
  return "";
}

}  // namespace detail

/// Parses argv[1..argc) against `cmd`, in order (a later argument
/// overrides an earlier one). Returns std::nullopt when the program is to
/// run; otherwise the exit status it is to return: 0 after --help or
/// --version, 2 after a usage error. Prints (--help and --version to
/// stdout, a usage error and the usage to stderr) only when `prints`.
inline std::optional<int> parse_args(int argc, char** argv, const Command& cmd, bool prints = true) {
  auto error = [&](const std::string& what) {
    if (prints) std::cerr << cmd.program << ": " << what << "\n" << usage(cmd) << std::flush;
    return std::optional<int>(2);
  };
  std::size_t next_positional = 0;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--help" || s == "-h") {
      if (prints) std::cout << usage(cmd) << std::flush;
      return 0;
    }
    if (s == "--version") {
      if (prints) {
        std::cout << cmd.program << " (kloss examples)\n";
        kloss::print_configuration(std::cout);
        std::cout << std::flush;
      }
      return 0;
    }
    if (s.rfind("--kokkos-", 0) == 0) continue;
    if (s.size() > 1 && s[0] == '-') {
      std::optional<std::string> inline_value;
      if (const auto eq = s.find('='); eq != std::string::npos) {
        inline_value = s.substr(eq + 1);
        s = s.substr(0, eq);
      }
      const Arg* a = nullptr;
      for (const auto& c : cmd.args)
        if (!c.positional && c.name == s) a = &c;
      if (!a) return error("unknown option '" + s + "'");
      if (const auto* action = std::get_if<std::function<void()>>(&a->target)) {
        if (inline_value) return error(s + " takes no value");
        (*action)();
        continue;
      }
      if (!inline_value && i + 1 >= argc) return error(s + " needs a value (" + a->metavar + ")");
      const std::string msg = detail::assign(*a, inline_value ? *inline_value : std::string(argv[++i]));
      if (!msg.empty()) return error(msg);
      continue;
    }
    const Arg* p = nullptr;
    for (std::size_t k = 0, seen = 0; k < cmd.args.size() && !p; ++k)
      if (cmd.args[k].positional && seen++ == next_positional) p = &cmd.args[k];
    if (!p) return error("unexpected argument '" + s + "'");
    ++next_positional;
    if (const std::string msg = detail::assign(*p, s); !msg.empty()) return error(msg);
  }
  if (cmd.check)
    if (const std::string msg = cmd.check(); !msg.empty()) return error(msg);
  return std::nullopt;
}

}  // namespace kloss_examples
