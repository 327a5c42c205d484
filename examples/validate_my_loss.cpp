// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Validating against your own reference data: write your reference values
// as a golden file (../shared/golden/SCHEMA.md, kloss-golden/1) and run
// kloss's validator on it - the same check `kloss-validate FILE` does.
//
//   validate_my_loss [FILE]      (default: my_reference.h5 in the current directory)
//   validate_my_loss --help | --version
//
// Here the "reference" is a smooth_l1_loss computed by hand in double; in
// practice it comes from your code, PyTorch, or a published dataset.
#include <cmath>
#include <cstdio>
#include <kloss/kloss.hpp>

#include "common/args.hpp"

int main(int argc, char** argv) {
  std::string path = "my_reference.h5";
  const kloss_examples::Command cmd{
      "validate_my_loss",
      "",
      "Writes reference values of smooth_l1_loss as a golden HDF5 file (kloss-golden/1) and validates kloss\n"
      "against it, as `kloss-validate FILE` does.",
      {kloss_examples::positional("FILE", path, "the golden file to write and validate")},
      {}};
  if (const auto status = kloss_examples::parse_args(argc, argv, cmd)) return *status;
  Kokkos::ScopeGuard guard(argc, argv);
  const double beta = 0.5;
  // (values exactly representable in every dtype below, as the schema wants
  // inputs already rounded to the case dtype)
  const std::vector<double> x = {0.125, -1.25, 2.5, 0.375, 0.0, 1.0}, y = {0.0, 0.0, 1.0, 0.5, -2.0, 1.0};

  // 1. Your reference values: smooth_l1 per element, mean, and d/dinput
  //    for an upstream gradient of 1.
  double sum = 0;
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - y[i], a = std::fabs(d);
    sum += a < beta ? 0.5 * d * d / beta : a - 0.5 * beta;
    grad[i] = (a < beta ? d / beta : (d > 0 ? 1.0 : -1.0)) / x.size();
  }
  const kloss::Shape shape{2, 3};

  // 2. Write them as golden cases, one per dtype, with tolerances that fit it.
  std::vector<kloss::golden::CaseToWrite> cases;
  for (const char* dtype : {"float64", "float32", "bfloat16"}) {
    kloss::golden::CaseToWrite c;
    c.name = std::string("my_smooth_l1_") + dtype;
    c.op = "smooth_l1_loss";
    c.dtype = dtype;
    c.rtol = std::string(dtype) == "float64" ? 1e-12 : (std::string(dtype) == "float32" ? 1e-6 : 2e-2);
    c.atol = c.rtol;
    c.attributes["reduction"] = std::string("mean");
    c.attributes["beta"] = beta;
    c.float_inputs["input"] = {shape, x};
    c.float_inputs["target"] = {shape, y};
    c.float_inputs["grad_output"] = {kloss::Shape{}, {1.0}};
    c.output = {kloss::Shape{}, {sum / x.size()}};
    c.grads["input"] = {shape, grad};
    cases.push_back(c);
  }
  kloss::golden::write_golden_file(path, cases);

  // 3. Run them through kloss, exactly as `kloss-validate` does.
  const auto report = kloss::golden::validate_file(path);
  int passed = 0;
  for (const auto& r : report.cases) {
    std::printf("%-22s %-15s %-9s max abs err %.2e  %s\n", r.name.c_str(), r.op.c_str(), r.dtype.c_str(),
                r.max_abs_err, r.passed ? "pass" : ("FAIL: " + r.reason).c_str());
    passed += r.passed;
  }
  std::printf("%d passed, %d failed  (wrote %s; check it again with: kloss-validate %s)\n", passed,
              static_cast<int>(report.cases.size()) - passed, path.c_str(), path.c_str());
  return report.error.empty() && passed == static_cast<int>(report.cases.size()) ? 0 : 1;
}
