// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Downstream check: an mse_loss through the installed kloss, checked by hand.
#include <kloss/kloss.hpp>

#include <cmath>
#include <cstdio>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  Kokkos::View<float*> x("x", 3), y("y", 3);
  Kokkos::View<float> out("out");
  auto hx = Kokkos::create_mirror_view(x);
  auto hy = Kokkos::create_mirror_view(y);
  hx(0) = 1; hx(1) = 2; hx(2) = 3;
  hy(0) = 0; hy(1) = 0; hy(2) = 0;
  Kokkos::deep_copy(x, hx);
  Kokkos::deep_copy(y, hy);
  kloss::mse_loss(Kokkos::DefaultExecutionSpace(), x, y, out);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  const float want = 14.0f / 3.0f;
  std::printf("downstream mse_loss = %.6f (want %.6f), %zu ops registered\n", h(), want, kloss::ops().size());
  return std::fabs(h() - want) < 1e-6f ? 0 : 1;
}
