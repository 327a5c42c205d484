// kloss-ops: lists the registry - the README's op table comes from here.
//   kloss-ops            one line per op
//   kloss-ops --markdown the README table
//   kloss-ops --blas-env  `export OPENBLAS_CORETYPE=...` when the OpenBLAS
//                         this build loads runs kernels older than the CPU
//                         (kloss/blas_check.hpp; the scripts eval it), else
//                         nothing; the reason goes to stderr
#include <kloss/blas_check.hpp>
#include <kloss/registry.hpp>

#include <cstring>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--blas-env") == 0) {
    const std::string core = kloss::openblas_core(), advice = kloss::openblas_coretype_advice();
    if (!advice.empty()) {
      std::cerr << "kloss-ops: OpenBLAS runs its " << core << " kernels on this CPU; OPENBLAS_CORETYPE=" << advice
                << " runs the CPU's own\n";
      std::cout << "export OPENBLAS_CORETYPE=" << advice << "\n";
    }
    return 0;
  }
  const bool md = argc > 1 && std::strcmp(argv[1], "--markdown") == 0;
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
