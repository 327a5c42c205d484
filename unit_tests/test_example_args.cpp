// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The examples' command lines (examples/common/args.hpp): values read whole
// or refused, unknown options and stray arguments refused with status 2,
// --help and --version answered with status 0, nothing printed by a rank
// told not to print, Kokkos' options passed over.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../examples/common/args.hpp"

using kloss_examples::Command;
using kloss_examples::flag;
using kloss_examples::option;
using kloss_examples::parse_args;
using kloss_examples::positional;

namespace {

struct Values {
  int steps = 10;
  std::int64_t n = 5;
  double lr = 0.5;
  std::string out = "out", file = "f.h5";
  bool fast = false;
  kloss_examples::LogOptions log;
};

Command command(Values& v) {
  Command c{"prog",
            "",
            "A test program.",
            {option("--steps", v.steps, "N", "steps").at_least(1), option("--n", v.n, "N", "rows"),
             option("--lr", v.lr, "X", "rate"), option("--out", v.out, "DIR", "output"),
             flag(
                 "--fast", [&v] { v.fast = true; }, "go fast"),
             positional("FILE", v.file, "the file")},
            [&v]() -> std::string { return v.n > 100 ? "--n must be at most 100" : ""; }};
  for (auto& a : kloss_examples::log_args(v.log)) c.args.push_back(std::move(a));
  return c;
}

struct Parsed {
  std::optional<int> status;
  std::string out, err;
};

// Parses `args` (after a program name) against command(v), capturing what
// it printed.
Parsed run(Values& v, std::vector<std::string> args, bool prints = true) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  const Command c = command(v);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Parsed r;
  r.status = parse_args(static_cast<int>(argv.size()), argv.data(), c, prints);
  r.out = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  return r;
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(ExampleArgs, ReadsEveryKindOfValueInOrder) {
  Values v;
  const Parsed r = run(v, {"--steps", "7", "--n=12", "--lr", "-2.5e-3", "--out", "d i r", "--fast", "x.h5", "--steps",
                           "9", "--progress", "lines", "--log-every", "3", "--log-all-ranks"});
  EXPECT_FALSE(r.status.has_value()) << r.err;
  EXPECT_EQ(v.steps, 9);  // the later one wins
  EXPECT_EQ(v.n, 12);
  EXPECT_DOUBLE_EQ(v.lr, -2.5e-3);
  EXPECT_EQ(v.out, "d i r");
  EXPECT_TRUE(v.fast);
  EXPECT_EQ(v.file, "x.h5");
  EXPECT_EQ(v.log.mode, kloss_examples::LogOptions::Mode::lines);
  EXPECT_EQ(v.log.every, 3);
  EXPECT_TRUE(v.log.all_ranks);
  EXPECT_EQ(r.out + r.err, "");
}

TEST(ExampleArgs, NoArgumentsKeepTheDefaults) {
  Values v;
  EXPECT_FALSE(run(v, {}).status.has_value());
  EXPECT_EQ(v.steps, 10);
  EXPECT_EQ(v.file, "f.h5");
}

TEST(ExampleArgs, KokkosOptionsArePassedOver) {
  Values v;
  EXPECT_FALSE(run(v, {"--kokkos-num-threads=2", "--steps", "3"}).status.has_value());
  EXPECT_EQ(v.steps, 3);
}

TEST(ExampleArgs, UsageErrorsAreStatusTwoWithTheUsageOnStderr) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--step", "100"}, "unknown option '--step'"},
      {{"--steps", "abc"}, "--steps needs an integer, got 'abc'"},
      {{"--steps", "1e3"}, "--steps needs an integer, got '1e3'"},
      {{"--steps", "12x"}, "--steps needs an integer, got '12x'"},
      {{"--steps", ""}, "--steps needs an integer, got ''"},
      {{"--steps", "99999999999"}, "--steps needs an integer"},
      {{"--steps", "0"}, "--steps must be at least 1, got 0"},
      {{"--lr", "fast"}, "--lr needs a finite number, got 'fast'"},
      {{"--lr", "inf"}, "--lr needs a finite number"},
      {{"--lr", " 1"}, "--lr needs a finite number"},
      {{"--steps"}, "--steps needs a value (N)"},
      {{"--fast=1"}, "--fast takes no value"},
      {{"--progress", "fancy"}, "--progress must be auto|bar|lines, got 'fancy'"},
      {{"--log-every", "0"}, "--log-every must be at least 1"},
      {{"a.h5", "b.h5"}, "unexpected argument 'b.h5'"},
      {{"--n", "101"}, "--n must be at most 100"},
  };
  for (const auto& [args, message] : cases) {
    Values v;
    const Parsed r = run(v, args);
    ASSERT_TRUE(r.status.has_value()) << message;
    EXPECT_EQ(*r.status, 2) << message;
    EXPECT_TRUE(contains(r.err, "prog: " + message)) << r.err;
    EXPECT_TRUE(contains(r.err, "usage: prog [options] [FILE]")) << r.err;
    EXPECT_EQ(r.out, "") << message;
  }
}

TEST(ExampleArgs, HelpIsStatusZeroWithTheUsageOnStdout) {
  Values v;
  const Parsed r = run(v, {"--steps", "abc", "--help"});  // the error comes first
  EXPECT_EQ(r.status, std::optional<int>(2));
  const Parsed h = run(v, {"--help", "--steps", "abc"});
  EXPECT_EQ(h.status, std::optional<int>(0));
  EXPECT_EQ(h.err, "");
  EXPECT_TRUE(contains(h.out, "usage: prog [options] [FILE]\nA test program.\n")) << h.out;
  EXPECT_TRUE(contains(h.out, "--steps N")) << h.out;
  EXPECT_TRUE(contains(h.out, "(default: 10)")) << h.out;
  EXPECT_TRUE(contains(h.out, "(default: total/20)")) << h.out;
  EXPECT_TRUE(contains(h.out, "--version")) << h.out;
}

TEST(ExampleArgs, VersionIsStatusZeroWithTheConfiguration) {
  Values v;
  const Parsed r = run(v, {"--version"});
  EXPECT_EQ(r.status, std::optional<int>(0));
  EXPECT_TRUE(contains(r.out, "kloss " + kloss::version() + " (git ")) << r.out;
  EXPECT_TRUE(contains(r.out, "kokkos_version: ")) << r.out;
}

// Under MPI every rank parses the same argv; only rank 0 prints.
TEST(ExampleArgs, ARankToldNotToPrintIsSilentButGivesTheSameStatus) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"--version"}, {"--steps", "abc"}, {"--step", "1"}}) {
    Values a, b;
    const Parsed loud = run(a, args, true), quiet = run(b, args, false);
    EXPECT_EQ(loud.status, quiet.status);
    EXPECT_NE(loud.out + loud.err, "");
    EXPECT_EQ(quiet.out + quiet.err, "");
  }
}

}  // namespace
