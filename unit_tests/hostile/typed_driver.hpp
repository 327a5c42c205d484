// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Driver 2: the tensor entry points every public overload forwards to
// (kloss::impl::<op> on unmanaged views), for the call's dtypes: one
// TypedRun, its guards, inputs untouched, then the numbers.
#include "dispatch.hpp"

namespace hostile {

// --- driver 2: the tensor entry points, guarded and aliased ----------------------------

/// Densifies a row-sparse gradient (U rows) into [V, D].
inline Vec densify(const std::vector<I64>& rows, const Vec& vals, I64 U, I64 V, I64 D) {
  Vec dense(static_cast<std::size_t>(V * D), 0.0);
  for (I64 u = 0; u < U; ++u)
    for (I64 d = 0; d < D; ++d)
      if (rows[u] >= 0 && rows[u] < V) dense[rows[u] * D + d] = vals[u * D + d];
  return dense;
}

template <class T, class I>
Outcome via_typed_as(const Case& c, const Expected& E, Rng& r, std::string& plan) {
  TypedRun<T, I> t(c, E);
  t.plan(r);
  if (!t.alias.host.empty())
    plan = t.alias.out + " over " + t.alias.host + " at +" + std::to_string(t.alias.byte_offset) +
           (t.alias.allowed ? " (allowed)" : "");
  if (!t.bad_out.empty()) plan = "wrong shape of " + t.bad_out;
  for (const auto& s : t.skipped) plan += " without " + s;
  std::vector<std::string> words;
  if (!t.bad_out.empty())
    words = {t.bad_out};
  else if (!t.alias.host.empty() && !t.alias.allowed) {
    words = {t.alias.out, t.alias.host};
    for (const auto& [b, a] : c.shared)
      if (a == t.alias.host) words.push_back(b);
  }
  const std::string who = c.op;
  t.make_inputs();
  try {
    typed_calls<T, I>(t);
  } catch (const kloss::Error& e) {
    if (words.empty()) return Outcome::bad("typed API threw on a valid call: " + std::string(e.what()));
    std::string why;
    if (!names_it(e.what(), who, words, why)) return Outcome::bad("typed API: " + why);
    return {Outcome::threw, e.what()};
  } catch (const std::exception& e) {
    return Outcome::bad(std::string("typed API threw a non-kloss exception: ") + e.what());
  }
  // Guards, inputs untouched, then the numbers.
  for (const auto& [name, g] : t.buf) {
    const auto h = g.read();
    const std::string d = g.damaged(h);
    if (!d.empty()) return Outcome::bad("typed API wrote " + d + " '" + name + "'");
    const Arg* a = c.find(name);
    const bool may_change = (name == "weight" && t.renorm) || (t.alias.allowed && name == t.alias.host);
    if ((a || name == "grad_output") && !may_change &&
        !std::equal(g.initial.begin(), g.initial.end(), h.begin() + Guarded::guard))
      return Outcome::bad("typed API modified input '" + name + "'");
  }
  if (!words.empty()) return Outcome::bad("typed API accepted " + plan);
  std::map<std::string, Vec> grads;
  for (const auto& [name, want] : E.grads) {
    (void)want;
    const std::string g = "grad_" + name;
    if (t.skipped.count(g)) continue;
    if (name == "weight" && t.sparse_rows >= 0) {
      const I64 V = c.find("weight")->shape[0], D = c.find("weight")->shape[1];
      const Vec rows = t.template read_values<I>("grad_indices");
      std::vector<I64> ri(rows.begin(), rows.end());
      if (t.sparse_rows < 0 || t.sparse_rows > static_cast<I64>(ri.size()))
        return Outcome::bad("typed API: sparse backward returned " + std::to_string(t.sparse_rows) + " rows");
      grads[name] = densify(ri, t.template read_values<T>("grad_values"), t.sparse_rows, V, D);
      continue;
    }
    grads[name] = t.template read_values<T>(g);
  }
  std::map<std::string, Vec> want_grads;
  for (const auto& [name, g] : E.grads)
    if (!t.skipped.count("grad_" + name)) want_grads[name] = g;
  Expected E2 = E;
  E2.grads = want_grads;
  Outcome o = compare_result(c, E2, t.shape_of("output"), t.template read_values<T>("output"), grads, "typed API");
  if (o.kind != Outcome::matched) return o;
  std::string why;
  if (t.renorm &&
      !close(t.template read_values<T>("weight"), E.weight_after, c.dtype, "typed API renormalised weight", why))
    return Outcome::bad(why);
  if (!E.max_indices.empty()) {
    const Vec mi = t.template read_values<I>("max_indices");
    for (std::size_t i = 0; i < mi.size(); ++i)
      if (E.max_indices[i] != any_index && static_cast<I64>(mi[i]) != E.max_indices[i])
        return Outcome::bad("typed API max_indices[" + std::to_string(i) + "] = " + std::to_string(mi[i]) + ", want " +
                            std::to_string(E.max_indices[i]));
  }
  return {};
}

template <class T>
struct Tag {
  using type = T;
};

/// Runs a valid call through the tensor entry points of its dtypes.
inline Outcome via_typed(const Case& c, const Expected& E, Rng& r, std::string& plan) {
  auto with_index = [&](auto tag) -> Outcome {
    using T = typename decltype(tag)::type;
    if (c.index_dtype == rt::DType::int32) return via_typed_as<T, std::int32_t>(c, E, r, plan);
    return via_typed_as<T, std::int64_t>(c, E, r, plan);
  };
  switch (c.dtype) {
    case rt::DType::float32:
      return with_index(Tag<float>{});
    case rt::DType::float64:
      return with_index(Tag<double>{});
    case rt::DType::float16:
      return with_index(Tag<kloss::float16>{});
    case rt::DType::bfloat16:
      return with_index(Tag<kloss::bfloat16>{});
    default:
      return {Outcome::not_applicable, "not a floating dtype"};
  }
}

}  // namespace hostile
