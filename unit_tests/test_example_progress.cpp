// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The examples' progress output (examples/common/progress.hpp): when a bar
// is drawn, which steps print a line in a log, and that ranks other than 0
// are silent unless asked.
#include <gtest/gtest.h>

#include <string>

#include "../examples/common/progress.hpp"

using kloss_examples::draws_bar;
using kloss_examples::LogOptions;
using kloss_examples::Progress;

namespace {

// Runs `body` and returns what it printed to stdout.
template <class F>
std::string printed(F&& body) {
  ::testing::internal::CaptureStdout();
  body();
  return ::testing::internal::GetCapturedStdout();
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(ExampleProgress, BarOnlyOnOwnTerminal) {
  using M = LogOptions::Mode;
  EXPECT_TRUE(draws_bar(M::automatic, true, false));    // a terminal, no launcher
  EXPECT_FALSE(draws_bar(M::automatic, true, true));    // mpirun's pseudo-terminal
  EXPECT_FALSE(draws_bar(M::automatic, false, false));  // a file or a pipe
  EXPECT_TRUE(draws_bar(M::bar, false, true));
  EXPECT_FALSE(draws_bar(M::lines, true, false));
}

TEST(ExampleProgress, LinesAtFirstEveryNthLastAndKept) {
  LogOptions o;
  o.mode = LogOptions::Mode::lines;
  o.every = 4;
  Progress p(10, o, 0);
  const std::string out = printed([&] {
    for (int s = 1; s <= 10; ++s) p.step(s, "x", s == 6);
    p.finish();
  });
  EXPECT_EQ(out,
            "step  1/10  x\n"
            "step  4/10  x\n"
            "step  6/10  x\n"
            "step  8/10  x\n"
            "step 10/10  x\n");
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

TEST(ExampleProgress, DefaultEveryIsATwentiethOfTheSteps) {
  LogOptions o;
  o.mode = LogOptions::Mode::lines;
  Progress p(300, o, 0);
  const std::string out = printed([&] {
    for (int s = 1; s <= 300; ++s) p.step(s, "x");
  });
  EXPECT_EQ(count(out, "\n"), 21);  // step 1, then 15, 30, ..., 300
}

TEST(ExampleProgress, BarRedrawsInPlaceAndKeepsMilestones) {
  LogOptions o;
  o.mode = LogOptions::Mode::bar;
  Progress p(4, o, 0);
  const std::string out = printed([&] {
    for (int s = 1; s <= 4; ++s) p.step(s, "x", s == 2);
    p.line("done");
  });
  EXPECT_EQ(count(out, "\r["), 4);
  EXPECT_EQ(count(out, "\n"), 3);  // the kept step 2, the open bar closed, the line
  EXPECT_NE(out.find("] 2/4  x\n"), std::string::npos);
  EXPECT_NE(out.find("] 4/4  x\ndone\n"), std::string::npos);
}

TEST(ExampleProgress, OtherRanksSilentUnlessAllRanks) {
  LogOptions o;
  o.mode = LogOptions::Mode::lines;
  Progress quiet(3, o, 1);
  EXPECT_EQ(printed([&] {
              quiet.step(1, "x");
              quiet.line("y");
            }),
            "");
  o.all_ranks = true;
  Progress loud(3, o, 2);
  EXPECT_EQ(printed([&] { loud.step(3, "x"); }), "[rank 2] step 3/3  x\n");
}
