// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Driver 1: the runtime-typed API (kloss::rt::run), every input a buffer of
// its dtype (some converted), the result compared with the reference or
// the error with the breakage.
#include "check.hpp"

namespace hostile {

// --- driver 1: the runtime-typed API ------------------------------------------------------

inline rt::Buffer to_buffer(const Arg& a) {
  const Shape s(a.shape);
  if (!a.index) return rt::Buffer::from_doubles(a.dtype, s, a.values);
  if (!a.values.empty()) return rt::Buffer::from_doubles(a.dtype, s, a.values);
  if (rt::is_floating(a.dtype)) return rt::Buffer::from_doubles(a.dtype, s, ivals_as_doubles(a));
  return rt::Buffer::from_int64(a.dtype, s, a.ivalues);
}

inline rt::Call to_call(const Case& c) {
  rt::Call call;
  call.op = c.op;
  call.dtype = c.dtype;
  call.index_dtype = c.index_dtype;
  for (const auto& a : c.inputs) call.inputs[a.name] = to_buffer(a);
  for (const auto& [k, v] : c.options) call.options.set(k, v);
  if (c.backward)
    call.grad_output = rt::Buffer::from_doubles(value_dtype(c), Shape(c.grad_output.shape), c.grad_output.values);
  return call;
}

inline Outcome via_runtime(const Case& c, const Expected* E) {
  rt::Call call;
  try {
    call = to_call(c);
  } catch (const std::exception& e) {
    return Outcome::bad(std::string("building the buffers failed: ") + e.what());
  }
  try {
    const rt::Result res = rt::run(call);
    if (!c.valid()) return Outcome::bad("runtime API accepted a broken call (" + c.mutation + ")");
    std::map<std::string, Vec> grads;
    for (const auto& [k, b] : res.grads) grads[k] = b.to_doubles();
    if (c.backward && res.grads.size() != E->grads.size())
      return Outcome::bad("runtime API: " + std::to_string(res.grads.size()) + " gradients, want " +
                          std::to_string(E->grads.size()));
    if (res.output.dtype() != c.dtype)
      return Outcome::bad("runtime API: output dtype " + dtype_name(res.output.dtype()));
    return compare_result(c, *E, res.output.shape().to_vector(), res.output.to_doubles(), grads, "runtime API");
  } catch (const kloss::Error& e) {
    return judge_error(c, e.what());
  } catch (const std::exception& e) {
    return Outcome::bad(std::string("runtime API threw a non-kloss exception: ") + e.what());
  }
}

}  // namespace hostile
