// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The op registry: every family's registration function, called once.
#include <kloss/config.hpp>
#include "runtime_support.hpp"
#include <kloss/registry.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>

namespace kloss {

namespace impl {
namespace {
/// The registry's option texts, made once and kept for the program's life
/// (OptionInfo holds string_views). A deque does not move its strings.
std::string_view keep(std::string text) {
  static std::mutex mutex;
  static std::deque<std::string> texts;
  const std::lock_guard<std::mutex> lock(mutex);
  for (const auto& t : texts)
    if (t == text) return t;
  return texts.emplace_back(std::move(text));
}
}  // namespace

std::string_view option_text(double value) {
  if (std::isinf(value)) return keep(value > 0 ? "inf" : "-inf");
  if (std::isnan(value)) return keep("nan");
  std::string text;
  for (int digits = 1; digits <= 17; ++digits) {  // the shortest text that reads back as value
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*g", digits, value);
    text = buf;
    if (std::strtod(buf, nullptr) == value) break;
  }
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return keep(std::move(text));
}

std::string_view option_text(bool value) { return keep(value ? "True" : "False"); }

std::string_view option_text(std::int64_t value) { return keep(std::to_string(value)); }

}  // namespace impl

const std::vector<OpInfo>& ops() {
  static const std::vector<OpInfo> all = [] {
    std::vector<OpInfo> v;
    impl::register_pointwise(v);
    impl::register_cross_entropy(v);
    impl::register_margin(v);
    impl::register_ctc(v);
    impl::register_embedding(v);
    impl::register_fused_linear(v);
    impl::register_ensemble(v);
    impl::register_grid(v);
#ifdef KLOSS_HAVE_MPI
    impl::register_vocab_parallel(v);
#endif
    return v;
  }();
  return all;
}

const OpInfo* find_op(std::string_view name) {
  for (const auto& op : ops())
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace kloss
