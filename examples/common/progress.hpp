// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Progress output of the examples, readable in a terminal and in a batch
// log alike.
//
// A bar redrawn in place with '\r' is only drawn on an interactive terminal
// that is the program's own. Under an MPI launcher (mpirun, srun) a rank's
// stdout is a pipe or a pseudo-terminal the launcher forwards - to a batch
// log as often as to a screen, and OpenMPI gives ranks a pseudo-terminal
// even when mpirun's output goes to a file - so there, and whenever stdout
// is not a terminal, progress is one line every N steps plus the first and
// the last. Rank 0 alone prints unless asked otherwise.
//
// The options of the examples that report progress (read into a LogOptions
// by examples/common/args.hpp's log_args):
//   --progress auto|bar|lines  auto (default): the bar on a terminal outside
//                              an MPI launcher, lines otherwise
//   --log-every N              lines: one every N steps (default: total/20)
//   --log-all-ranks            every rank prints, its lines prefixed [rank r]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace kloss_examples {

struct LogOptions {
  enum class Mode { automatic, bar, lines };
  Mode mode = Mode::automatic;
  int every = 0;  ///< 0: total / 20
  bool all_ranks = false;
};

/// Whether an MPI launcher or a batch system started this process (its
/// stdout is then forwarded by that launcher).
inline bool under_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS", "SLURM_PROCID",
                        "PBS_JOBID", "LSB_JOBID"})
    if (std::getenv(v)) return true;
  return false;
}

/// under_launcher() as it was when the program started: MPI_Init of a
/// process started without a launcher (a singleton) sets some of those
/// variables itself.
inline const bool launched_by_launcher = under_launcher();

/// Whether `mode` means a bar redrawn in place, given whether stdout is a
/// terminal and whether a launcher started the process.
inline bool draws_bar(LogOptions::Mode mode, bool stdout_is_tty, bool launched) {
  if (mode == LogOptions::Mode::bar) return true;
  if (mode == LogOptions::Mode::lines) return false;
  return stdout_is_tty && !launched;
}

/// Progress over steps 1..total: step() redraws a bar or prints a line.
class Progress {
 public:
  Progress(int total, const LogOptions& o, int rank)
      : total_(total > 0 ? total : 1),
        every_(o.every > 0 ? o.every : (total_ / 20 > 0 ? total_ / 20 : 1)),
        prints_(rank == 0 || o.all_ranks),
        bar_(draws_bar(o.mode, isatty(1) != 0, launched_by_launcher)),
        prefix_(o.all_ranks ? "[rank " + std::to_string(rank) + "] " : "") {}

  bool bar() const { return bar_; }

  /// Reports step `s` with `text`. A bar is redrawn every step; `keep`
  /// leaves that state of it as a line of its own (for milestones). Lines
  /// come at the first and last steps, every `every` steps, and at `keep`.
  void step(int s, const std::string& text, bool keep = false) {
    if (!prints_) return;
    if (bar_) {
      const int w = 30, fill = s * w / total_;
      std::printf("\r%s[%s%s] %*d/%d  %s%s", prefix_.c_str(), std::string(fill, '#').c_str(),
                  std::string(w - fill, '.').c_str(), width(), s, total_, text.c_str(), keep ? "\n" : "");
      open_ = !keep;
    } else if (s == 1 || s == total_ || s % every_ == 0 || keep) {
      std::printf("%sstep %*d/%d  %s\n", prefix_.c_str(), width(), s, total_, text.c_str());
    }
    std::fflush(stdout);
  }

  /// Prints a line of its own (after closing an open bar).
  void line(const std::string& text) {
    if (!prints_) return;
    if (open_) std::printf("\n");
    open_ = false;
    std::printf("%s%s\n", prefix_.c_str(), text.c_str());
    std::fflush(stdout);
  }

  /// Ends an open bar with a newline.
  void finish() {
    if (prints_ && open_) std::printf("\n");
    open_ = false;
    std::fflush(stdout);
  }

 private:
  int width() const { return static_cast<int>(std::to_string(total_).size()); }
  int total_, every_;
  bool prints_, bar_;
  std::string prefix_;
  bool open_ = false;
};

}  // namespace kloss_examples
