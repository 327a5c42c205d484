// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss-ops: lists the registry - the README's op table comes from here.
//   kloss-ops            one line per op
//   kloss-ops --markdown the README table
//   kloss-ops --blas-env  `export OPENBLAS_CORETYPE=...` when the OpenBLAS
//                         this build loads runs kernels older than the CPU
//                         (kloss/blas_check.hpp; the scripts eval it), else
//                         nothing; the reason goes to stderr
//   kloss-ops --help | --version
// Any other argument is a usage error: the usage on stderr, exit status 2.
#include <iostream>
#include <kloss/blas_check.hpp>
#include <kloss/registry.hpp>
#include <kloss/version.hpp>
#include <string>

namespace {

void usage(std::ostream& os) {
  os << "usage: kloss-ops [--markdown | --blas-env | --help | --version]\n"
        "Lists kloss's registered ops: one line per op (name, inputs, gradients, options with torch's defaults).\n"
        "  --markdown   the list as the README's Markdown table\n"
        "  --blas-env   `export OPENBLAS_CORETYPE=...` when the OpenBLAS this build loads runs kernels\n"
        "               older than the CPU's, else nothing (the reason goes to stderr)\n"
        "  --help       this message\n"
        "  --version    kloss's version and the configuration it was built with\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string arg = argc > 1 ? argv[1] : "";
  if (argc > 2 || !(arg.empty() || arg == "--markdown" || arg == "--blas-env" || arg == "--help" || arg == "-h" ||
                    arg == "--version")) {
    std::cerr << "kloss-ops: " << (argc > 2 ? "one option at most" : "unknown option '" + arg + "'") << "\n";
    usage(std::cerr);
    return 2;
  }
  if (arg == "--help" || arg == "-h") {
    usage(std::cout);
    return 0;
  }
  if (arg == "--version") {
    std::cout << "kloss-ops " << kloss::version() << "\n";
    kloss::print_configuration(std::cout);
    return 0;
  }
  if (arg == "--blas-env") {
    const std::string core = kloss::openblas_core(), advice = kloss::openblas_coretype_advice();
    if (!advice.empty()) {
      std::cerr << "kloss-ops: OpenBLAS runs its " << core << " kernels on this CPU; OPENBLAS_CORETYPE=" << advice
                << " runs the CPU's own\n";
      std::cout << "export OPENBLAS_CORETYPE=" << advice << "\n";
    }
    return 0;
  }
  const bool md = arg == "--markdown";
  if (md) {
    std::cout << "| op | header | inputs | gradients | options (torch defaults) |\n|---|---|---|---|---|\n";
  }
  for (const auto& op : kloss::ops()) {
    std::string inputs, grads, options;
    for (auto s : op.inputs) inputs += (inputs.empty() ? "" : ", ") + std::string(s);
    for (auto s : op.differentiable) grads += (grads.empty() ? "" : ", ") + std::string(s);
    for (const auto& o : op.options)
      options += (options.empty() ? "" : ", ") + std::string(o.name) + "=" + std::string(o.default_value);
    if (md) {
      std::cout << "| `" << op.name << "` | `" << op.header << "` | " << inputs << " | " << grads << " | " << options
                << " |\n";
    } else {
      std::cout << op.name << "  (" << inputs << ")  grads: " << grads << "  options: " << options << "\n";
    }
  }
  return 0;
}
