// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The ten-line use of kloss: cross-entropy forward and backward on Views,
// through the loss object (kloss/cross_entropy_loss.hpp).
//
//   cross_entropy_basic [--help] [--version]
#include <cstdio>
#include <kloss/kloss.hpp>

#include "common/args.hpp"

int main(int argc, char** argv) {
  const kloss_examples::Command cmd{"cross_entropy_basic",
                                    "",
                                    "Cross-entropy forward and backward on Views through kloss::CrossEntropyLoss: "
                                    "prints the loss and a row of its gradient.",
                                    {},
                                    {}};
  if (const auto status = kloss_examples::parse_args(argc, argv, cmd)) return *status;
  Kokkos::ScopeGuard guard(argc, argv);
  const int N = 4, C = 5;
  Kokkos::DefaultExecutionSpace exec;
  Kokkos::View<float**, Kokkos::LayoutRight> logits("logits", N, C);  // [N, C]
  Kokkos::View<std::int64_t*> labels("labels", N);      // class indices
  Kokkos::View<float> loss("loss");                     // reduced (mean): one element
  Kokkos::parallel_for("fill", N * C, KOKKOS_LAMBDA(const int i) { logits(i / C, i % C) = 0.1f * (i % 7); });
  Kokkos::parallel_for("labels", N, KOKKOS_LAMBDA(const int n) { labels(n) = (3 * n) % C; });

  kloss::CrossEntropyLoss<float> ce;  // torch's defaults; holds what the backward needs
  ce.forward(exec, logits, labels, loss);
  ce.backward(exec, logits, labels, logits);  // d(loss)/d(logits), written over the logits

  auto h_loss = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), loss);
  auto h_grad = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), logits);  // now the gradient
  std::printf("cross_entropy = %.6f\ngrad row 0 =", h_loss());
  for (int c = 0; c < C; ++c) std::printf(" %+.5f", h_grad(0, c));
  std::printf("  (softmax - onehot) / N: sums to 0\n");
  return 0;
}
