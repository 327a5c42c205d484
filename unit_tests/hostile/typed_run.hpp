// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The typed driver's run of one valid call (TypedRun): each input and
// output in a guarded buffer of the execution space's memory, outputs
// pre-filled with garbage, optionally placed over an input or another
// output, left out, or of a wrong shape. Each family's part makes its
// calls on it (typed_<family>); typed_driver.hpp judges the run.
#include "check.hpp"

namespace hostile {

namespace ki = kloss::impl;
using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
template <class U>
using Ten = kloss::Tensor<U, Mem>;

/// A buffer in the execution space's memory with guard bytes before and
/// after its payload (and optional room after the payload, for an output
/// placed partly over it).
struct Guarded {
  static constexpr std::size_t guard = 64;
  Kokkos::View<unsigned char*, Mem> all;
  std::size_t payload = 0;
  std::vector<unsigned char> initial;  // the payload as filled

  static unsigned char pattern(std::size_t i) { return static_cast<unsigned char>(0xA5 ^ (i * 31)); }
  unsigned char* data() const { return all.data() + guard; }
  std::size_t total() const { return all.extent(0); }

  void make(const std::vector<unsigned char>& fill, std::size_t room) {
    payload = fill.size();
    initial = fill;
    const std::size_t n = guard + payload + room + guard;
    all = Kokkos::View<unsigned char*, Mem>(Kokkos::ViewAllocateWithoutInitializing("hostile::guarded"), n);
    std::vector<unsigned char> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = pattern(i);
    std::copy(fill.begin(), fill.end(), h.begin() + guard);
    Kokkos::deep_copy(
        all,
        Kokkos::View<const unsigned char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(h.data(), n));
  }
  std::vector<unsigned char> read() const {
    std::vector<unsigned char> h(total());
    Kokkos::deep_copy(
        Kokkos::View<unsigned char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(h.data(), h.size()),
        all);
    return h;
  }
  /// "" if every byte outside the payload still holds its guard pattern.
  std::string damaged(const std::vector<unsigned char>& h) const {
    for (std::size_t i = 0; i < h.size(); ++i) {
      if (i >= guard && i < guard + payload) continue;
      if (h[i] != pattern(i)) {
        const long at = static_cast<long>(i) - static_cast<long>(guard);
        return at < 0 ? "byte " + std::to_string(-at) + " before the buffer"
                      : "byte " + std::to_string(at - static_cast<long>(payload)) + " after the buffer";
      }
    }
    return "";
  }
};

template <class U>
U to_value(double x) {
  if constexpr (std::is_same_v<U, kloss::float16> || std::is_same_v<U, kloss::bfloat16>)
    return U(static_cast<float>(x));
  else
    return static_cast<U>(x);
}
template <class U>
double from_value(const U& v) {
  if constexpr (std::is_same_v<U, kloss::float16> || std::is_same_v<U, kloss::bfloat16>)
    return static_cast<float>(v);
  else
    return static_cast<double>(v);
}
template <class U>
std::vector<unsigned char> bytes_of(const std::vector<U>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(U));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
template <class U>
std::vector<U> values_in(const std::vector<unsigned char>& h, std::size_t off, std::size_t n) {
  std::vector<U> v(n);
  if (n) std::memcpy(v.data(), h.data() + off, n * sizeof(U));
  return v;
}

/// Where each output of a typed call goes, and what it is.
struct Slot {
  Ext shape;
  std::size_t elem = 0;
  bool backward = false;  // written by a backward call
  int call = 0;           // which call writes it: the forward, the backward, a second backward
  I64 bytes() const { return kloss_ref::numel(shape) * static_cast<I64>(elem); }
};

/// The outputs of a typed call of a valid case, in the order the calls
/// create them, and the forward outputs the backward reads. The outputs
/// besides the loss and the gradients (lse, total_weight, log_alpha,
/// max_indices, a sparse gradient's rows) are kloss::impl's signatures,
/// which the registry does not list: written out per op.
template <class T, class I>
void typed_layout(const Case& c, const Expected& E, std::vector<std::pair<std::string, Slot>>& outs,
                  std::vector<std::string>& saved) {
  using A = kloss::acc_t<T>;
  const std::string& op = c.op;
  outs.push_back({"output", {E.out_shape, sizeof(T), false}});
  const Arg* t = c.find("target");
  if (op == "cross_entropy") {
    const Arg* x = c.find("input");
    Ext rows = x->shape.size() == 1 ? Ext{} : Ext{x->shape[0]};
    for (std::size_t i = 2; i < x->shape.size(); ++i) rows.push_back(x->shape[i]);
    outs.push_back({"lse", {rows, sizeof(A), false}});
    saved.push_back("lse");
    if (t->index) {
      outs.push_back({"total_weight", {{}, sizeof(double), false}});
      saved.push_back("total_weight");
    }
  }
  if (op == "nll_loss") {
    outs.push_back({"total_weight", {{}, sizeof(double), false}});
    saved.push_back("total_weight");
  }
  if (op == "ctc_loss" && c.backward) {
    outs.push_back({"log_alpha", {E.ctc_log_alpha_shape, sizeof(A), false}});
    saved.push_back("log_alpha");
  }
  if (op == "embedding_bag" && !E.max_indices_shape.empty()) {
    outs.push_back({"max_indices", {E.max_indices_shape, sizeof(I), false}});
    saved.push_back("max_indices");
  }
  if (!c.backward) return;
  // (embedding_bag's mode max has no sparse backward)
  const bool sparse =
      family_of(op) == Family::embedding && str_opt(c, "mode", "mean") != "max" && bool_opt(c, "sparse");
  // In the order the backward creates them: the registry's.
  for (auto dn : kloss::find_op(op)->differentiable) {
    const std::string name(dn);
    if (!E.grads.count(name)) continue;
    if (name == "weight" && sparse) {
      const I64 n = c.find("input")->numel(), D = c.find("weight")->shape[1];
      outs.push_back({"grad_indices", {{n}, sizeof(I), true, 1}});
      outs.push_back({"grad_values", {{n, D}, sizeof(T), true, 1}});
      // (the dense backward, a second call, gives the per-sample weights' gradient)
      if (c.find("per_sample_weights")) outs.push_back({"grad_weight", {c.find("weight")->shape, sizeof(T), true, 2}});
      continue;
    }
    outs.push_back(
        {"grad_" + name, {c.find(name)->shape, sizeof(T), true, name == "per_sample_weights" && sparse ? 2 : 1}});
  }
}

/// The outputs a backward may leave out (an empty view skips them): which
/// backward entry points of kloss::impl take an empty gradient view, by
/// family - their signatures, not in the registry.
inline bool optional_grad(const std::string& op, const std::string& out) {
  const bool grad = out.rfind("grad_", 0) == 0;
  switch (family_of(op)) {
    case Family::pointwise:
    case Family::margin:
    case Family::fused_linear:
    case Family::grid:
      return grad;
    case Family::ensemble:
      return grad && op != "crps_ensemble";
    case Family::embedding:
      return op == "embedding_bag" && out == "grad_per_sample_weights";
    case Family::cross_entropy:
    case Family::ctc:
    case Family::none:
      break;
  }
  return false;
}

/// A typed call of a valid case: the outputs, their guards and aliasing.
template <class T, class I>
struct TypedRun {
  using A = kloss::acc_t<T>;
  const Case& c;
  const Expected& E;
  Exec exec;
  std::vector<std::pair<std::string, Slot>> outs;
  std::vector<std::string> saved;
  std::map<std::string, Guarded> buf;       // by buffer name
  std::map<std::string, std::string> home;  // argument -> buffer holding it
  std::map<std::string, I64> offset;        // byte offset of an aliased output in its home
  std::set<std::string> skipped;            // optional outputs left out
  std::string bad_out;                      // an output given the wrong shape
  Alias alias;
  bool renorm = false;
  I64 sparse_rows = -1;  // U of a sparse backward

  TypedRun(const Case& c_, const Expected& E_) : c(c_), E(E_) {}

  const Slot* slot(const std::string& n) const {
    for (const auto& [k, s] : outs)
      if (k == n) return &s;
    return nullptr;
  }

  /// Chooses the aliasing, wrong shapes and skipped outputs of this run.
  void plan(Rng& r) {
    typed_layout<T, I>(c, E, outs, saved);
    if (c.backward && r.coin(0.2)) {
      std::vector<std::string> opt;
      for (const auto& [k, s] : outs)
        if (optional_grad(c.op, k)) opt.push_back(k);
      if (opt.size() > 1 || (opt.size() == 1 && c.op == "embedding_bag")) skipped.insert(r.pick(opt));
    }
    const auto u = r.below(100);
    if (u < 12) {
      // An exact in-place gradient: allowed only where documented.
      const Arg* x = c.find("input");
      const Slot* g = slot("grad_input");
      if (x && g && !x->index && !skipped.count("grad_input") && x->shape == g->shape && x->numel() > 0 &&
          !c.shared.count("input")) {
        bool shared_host = false;
        for (const auto& [b, a] : c.shared) shared_host = shared_host || a == "input";
        alias = {"grad_input", "input", 0, c.op == "cross_entropy" && !shared_host};
      }
    } else if (u < 32) {
      // An output over an input or an earlier output of the same call.
      std::vector<std::string> cand;
      for (const auto& [k, s] : outs)
        if (s.bytes() > 0 && !skipped.count(k)) cand.push_back(k);
      if (cand.empty()) return;
      const std::string o = r.pick(cand);
      const Slot& so = *slot(o);
      std::vector<std::string> hosts;
      // (the backward of embedding, and embedding_bag's sparse one, do not
      // take the weight: writing over it is the caller's business)
      const bool weightless = so.backward && (c.op == "embedding" || o == "grad_indices" || o == "grad_values");
      for (const auto& a : c.inputs)
        if (a.numel() > 0 && !c.shared.count(a.name) && !(weightless && a.name == "weight")) hosts.push_back(a.name);
      if (so.backward) {
        if (c.grad_output.numel() > 0) hosts.push_back("grad_output");
        for (const auto& s : saved)
          if (slot(s)->bytes() > 0) hosts.push_back(s);
      }
      for (const auto& [k, s] : outs) {
        if (k == o) break;
        if (s.backward == so.backward && s.call == so.call && s.bytes() > 0 && !skipped.count(k)) hosts.push_back(k);
      }
      if (hosts.empty()) return;
      const std::string h = r.pick(hosts);
      const I64 hb = host_bytes(h);
      const I64 off = static_cast<I64>(r.below(static_cast<std::uint64_t>(hb))) / static_cast<I64>(so.elem) *
                      static_cast<I64>(so.elem);
      // The one documented in-place use, met by chance.
      bool shared_host = false;
      for (const auto& [b, a] : c.shared) shared_host = shared_host || a == h;
      const bool in_place =
          c.op == "cross_entropy" && o == "grad_input" && h == "input" && off == 0 && so.bytes() == hb && !shared_host;
      alias = {o, h, off, in_place};
    } else if (u < 42) {
      std::vector<std::string> cand;
      for (const auto& [k, s] : outs)
        if (!skipped.count(k) && k != "grad_indices" && k != "grad_values") cand.push_back(k);
      bad_out = r.pick(cand);
    }
  }

  I64 host_bytes(const std::string& h) const {
    if (const Slot* s = slot(h)) return s->bytes();
    if (h == "grad_output") return c.grad_output.numel() * static_cast<I64>(sizeof(T));
    const Arg* a = c.find(h);
    return a->numel() * static_cast<I64>(a->index ? sizeof(I) : sizeof(T));
  }
  /// Room after a buffer for an output placed partly over it.
  std::size_t room_for(const std::string& name) const {
    if (alias.host != name) return 0;
    const Slot* s = slot(alias.out);
    return static_cast<std::size_t>(s->bytes() + (bad_out == alias.out ? 64 : 0));
  }

  /// Allocates every input (shared ones once) in guarded buffers.
  void make_inputs() {
    for (const auto& a : c.inputs) {
      if (c.shared.count(a.name)) continue;
      std::vector<unsigned char> b;
      if (a.index) {
        std::vector<I> v(a.ivalues.size());
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<I>(a.ivalues[i]);
        b = bytes_of(v);
      } else {
        std::vector<T> v(a.values.size());
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = to_value<T>(a.values[i]);
        b = bytes_of(v);
      }
      buf[a.name].make(b, room_for(a.name));
      home[a.name] = a.name;
    }
    for (const auto& [b, a] : c.shared) home[b] = a;
    if (c.backward) {
      std::vector<T> v(c.grad_output.values.size());
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = to_value<T>(c.grad_output.values[i]);
      buf["grad_output"].make(bytes_of(v), room_for("grad_output"));
      home["grad_output"] = "grad_output";
    }
  }

  template <class U>
  Ten<const U> tensor_of(const std::string& name, const Ext& shape) {
    auto it = home.find(name);
    if (it == home.end()) return {};
    return Ten<const U>(reinterpret_cast<const U*>(buf.at(it->second).data() + offset[name]), Shape(shape));
  }
  Ten<const T> in(const std::string& name) {
    const Arg* a = c.find(name);
    return a ? tensor_of<T>(name, a->shape) : Ten<const T>{};
  }
  Ten<const I> idx(const std::string& name) {
    const Arg* a = c.find(name);
    return a ? tensor_of<I>(name, a->shape) : Ten<const I>{};
  }
  Ten<const T> go() { return tensor_of<T>("grad_output", c.grad_output.shape); }
  /// A forward output read back by the backward.
  template <class U>
  Ten<const U> saved_out(const std::string& name) {
    if (!home.count(name)) return {};
    return tensor_of<U>(name, shape_of(name));
  }
  Ext shape_of(const std::string& name) const {
    if (!slot(name)) return c.find(name)->shape;
    Ext s = slot(name)->shape;
    if (name == bad_out) {  // another shape and another element count
      if (s.empty())
        s = {2};
      else if (kloss_ref::numel(s) == 0)
        s = {1};
      else
        s.back() += 1;
    }
    return s;
  }
  /// An output: its own guarded buffer pre-filled with garbage, or placed
  /// over its alias host.
  template <class U>
  Ten<U> out(const std::string& name) {
    if (skipped.count(name) || !slot(name)) return {};
    const Ext s = shape_of(name);
    if (alias.out == name) {
      home[name] = home.at(alias.host);
      offset[name] = offset[alias.host] + alias.byte_offset;
    } else {
      std::vector<unsigned char> fill(static_cast<std::size_t>(kloss_ref::numel(s)) * sizeof(U), 0x7F);
      buf[name].make(fill, room_for(name));
      home[name] = name;
    }
    return Ten<U>(reinterpret_cast<U*>(buf.at(home[name]).data() + offset[name]), Shape(s));
  }
  /// The weight, renormalised in place under max_norm.
  Ten<T> weight_inout() {
    const Arg* a = c.find("weight");
    return Ten<T>(reinterpret_cast<T*>(buf.at(home.at("weight")).data()), Shape(a->shape));
  }

  template <class U>
  Vec read_values(const std::string& name) {
    const auto h = buf.at(home.at(name)).read();
    const auto n = static_cast<std::size_t>(kloss_ref::numel(shape_of(name)));
    const auto v = values_in<U>(h, Guarded::guard + static_cast<std::size_t>(offset[name]), n);
    Vec d(n);
    for (std::size_t i = 0; i < n; ++i) d[i] = from_value<U>(v[i]);
    return d;
  }
};

}  // namespace hostile
