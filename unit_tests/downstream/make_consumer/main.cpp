// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Makefile consumer (pkg-config kloss): a cross_entropy through the
// installed C++ API, checked by hand. Logits (0, 0) with target 0 and
// (0, ln 3) with target 1 lose ln 2 and ln(4/3): the mean is ln(8/3) / 2.
#include <kloss/kloss.hpp>
#include <kloss/version.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  Kokkos::View<double**, Kokkos::LayoutRight> logits("logits", 2, 2);
  Kokkos::View<std::int64_t*> target("target", 2);
  Kokkos::View<double> loss("loss");
  auto hl = Kokkos::create_mirror_view(logits);
  auto ht = Kokkos::create_mirror_view(target);
  hl(0, 0) = 0;
  hl(0, 1) = 0;
  hl(1, 0) = 0;
  hl(1, 1) = std::log(3.0);
  ht(0) = 0;
  ht(1) = 1;
  Kokkos::deep_copy(logits, hl);
  Kokkos::deep_copy(target, ht);
  kloss::cross_entropy(Kokkos::DefaultExecutionSpace(), logits, target, Kokkos::View<const double*>(), loss,
                       Kokkos::View<double*>(), Kokkos::View<double>());
  double got = 0;
  Kokkos::deep_copy(got, loss);
  const double want = std::log(8.0 / 3.0) / 2;
  const bool version_ok = kloss::version() == KLOSS_VERSION_STRING;
  std::printf("make_consumer (kloss %s) cross_entropy = %.12f (want %.12f)\n", kloss::version().c_str(), got, want);
  return std::fabs(got - want) < 1e-12 && version_ok ? 0 : 1;
}
