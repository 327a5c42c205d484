// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss::CheckFlag's host side (include/kloss/check_flag.hpp): the calls it
// records for and the verdict's message.
#include <kloss/check_flag.hpp>
#include <kloss/checks.hpp>

namespace kloss {

std::int64_t CheckFlag::note_call(std::string_view op, std::string_view arg, std::string_view allowed,
                                  impl::CheckKind kind) const {
  auto& calls = state_->calls;
  for (std::size_t i = 0; i < calls.size(); ++i)
    if (calls[i].kind == kind && calls[i].op == op && calls[i].arg == arg && calls[i].allowed == allowed)
      return static_cast<std::int64_t>(i);
  calls.push_back({std::string(op), std::string(arg), std::string(allowed), kind});
  return static_cast<std::int64_t>(calls.size()) - 1;
}

void CheckFlag::space_mismatch(std::string_view op, std::string_view space) const {
  fail<InvalidArgument>(op, "options.deferred_check lives in ", state_->space_name, " memory, the call runs in ", space,
                        ": make the flag with the call's execution space");
}

std::int64_t CheckFlag::violations() const {
  if (!state_) return 0;
  Kokkos::fence();
  return state_->read().total;
}

void CheckFlag::verdict() const {
  if (!state_) return;
  Kokkos::fence();
  const impl::CheckRecord r = state_->read();
  if (r.total == 0) return;
  state_->clear();
  const Call& c = state_->calls.at(static_cast<std::size_t>(r.call));
  const std::string all =
      r.total > r.count ? impl::concat(" (", r.total, " in all over the calls since the last verdict)") : "";
  if (c.kind == impl::CheckKind::index)
    fail<IndexOutOfRange>(c.op, "argument '", c.arg, "' has ", r.count, " value(s) outside ", c.allowed,
                          "; first at position ", r.position, ": ", r.value, all);
  fail<InvalidArgument>(c.op, "argument '", c.arg, "' (class probabilities) has ", r.count,
                        " negative or NaN value(s); first at position ", r.position, ": ", r.real, all);
}

}  // namespace kloss
