// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The smallest kloss program: a loss forward and backward on a few values,
// printed so a person can check them by hand.
//
//   kloss_demo [--help] [--version]
#include <cstdio>
#include <kloss/kloss.hpp>

#include "common/args.hpp"

int main(int argc, char** argv) {
  const kloss_examples::Command cmd{"kloss_demo",
                                    "",
                                    "The smallest kloss program: mse_loss forward and backward on four values, "
                                    "printed beside the values worked out by hand.",
                                    {},
                                    {}};
  if (const auto status = kloss_examples::parse_args(argc, argv, cmd)) return *status;
  Kokkos::ScopeGuard guard(argc, argv);
  using Mem = Kokkos::DefaultExecutionSpace::memory_space;
  Kokkos::DefaultExecutionSpace exec;
  Kokkos::View<double*, Mem> x("x", 4), y("y", 4), gx("gx", 4);
  Kokkos::View<double, Mem> loss("loss");
  auto hx = Kokkos::create_mirror_view(x);
  auto hy = Kokkos::create_mirror_view(y);
  for (int i = 0; i < 4; ++i) {
    hx(i) = i;
    hy(i) = 1.5;
  }
  Kokkos::deep_copy(x, hx);
  Kokkos::deep_copy(y, hy);
  kloss::MSELoss<double> mse;  // torch.nn.MSELoss(): mean reduction
  mse.forward(exec, x, y, loss);
  mse.backward(exec, x, y, gx, Kokkos::View<double*, Mem>());  // d(loss)/dx; no target gradient
  auto hl = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), loss);
  auto hg = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gx);
  std::printf("kloss demo on %s\n", Kokkos::DefaultExecutionSpace::name());
  std::printf("mse_loss([0 1 2 3], 1.5) = %.6f (by hand: 1.25)\n", hl());
  std::printf("grad = [%.3f %.3f %.3f %.3f] (by hand: [-0.75 -0.25 0.25 0.75])\n", hg(0), hg(1), hg(2), hg(3));
  return 0;
}
