// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Driver 3: the C API (kloss/c_api.h), with its own hostile arguments: dtype
// ints out of range, NULL pointers, negative ranks and extents, wrong
// sizes, calls out of order.
#include "typed_run.hpp"

namespace hostile {

// --- driver 3: the C API -------------------------------------------------------------------

inline int c_dtype(rt::DType d) {
  switch (d) {
    case rt::DType::float32:
      return KLOSS_FLOAT32;
    case rt::DType::float64:
      return KLOSS_FLOAT64;
    case rt::DType::float16:
      return KLOSS_FLOAT16;
    case rt::DType::bfloat16:
      return KLOSS_BFLOAT16;
    case rt::DType::int32:
      return KLOSS_INT32;
    default:
      return KLOSS_INT64;
  }
}

/// A host buffer with guard bytes around it.
struct HostGuarded {
  static constexpr std::size_t guard = 64;
  std::vector<unsigned char> b;
  std::size_t payload = 0;
  explicit HostGuarded(std::size_t bytes) : b(guard + bytes + guard), payload(bytes) {
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = Guarded::pattern(i);
    std::fill(b.begin() + guard, b.begin() + static_cast<long>(guard + bytes), 0x7F);
  }
  void* data() { return b.data() + guard; }
  bool intact() const {
    for (std::size_t i = 0; i < b.size(); ++i)
      if ((i < guard || i >= guard + payload) && b[i] != Guarded::pattern(i)) return false;
    return true;
  }
};

/// The elements of a C buffer of dtype d as doubles.
inline Vec c_values(const void* p, rt::DType d, std::size_t n) {
  rt::Buffer b(d, Shape{static_cast<I64>(n)});
  if (n) std::memcpy(b.data(), p, n * rt::dtype_size(d));
  return b.to_doubles();
}

/// The bytes of an argument in the C API's dtype for it (floating inputs in
/// the loss's dtype, integer ones in its index dtype).
inline std::vector<unsigned char> c_bytes(const Case& c, const Arg& a, rt::DType& d) {
  d = a.index ? c.index_dtype : c.dtype;
  rt::Buffer b = a.index ? rt::Buffer::from_int64(d, Shape(a.shape), a.ivalues)
                         : rt::Buffer::from_doubles(d, Shape(a.shape), a.values);
  std::vector<unsigned char> v(static_cast<std::size_t>(b.numel()) * rt::dtype_size(d));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size());
  return v;
}

/// The C API's own hostile arguments, one per run of a valid call.
enum class CBreak {
  none,
  create_dtype,
  create_index_dtype,
  create_null_op,
  create_unknown_op,
  input_rank,
  input_extent,
  input_null_data,
  input_null_name,
  input_null_shape,
  input_dtype_int,
  input_wrong_dtype,
  input_huge,
  option_null_name,
  option_null_value,
  forward_numel,
  forward_null_output,
  forward_dtype,
  grad_before_backward,
  grad_not_differentiable,
  grad_numel,
  null_loss,
  backward_numel,
  shape_before_forward,
  count
};

inline Outcome via_c_api(const Case& c, const Expected* E, Rng& r, std::string& plan) {
  if (runtime_only(c)) return {Outcome::not_applicable, "buffers only the runtime API converts"};
  CBreak brk = CBreak::none;
  if (c.valid() && r.coin(0.35)) brk = static_cast<CBreak>(1 + r.below(static_cast<std::uint64_t>(CBreak::count) - 1));
  plan = brk == CBreak::none ? "" : "C break " + std::to_string(static_cast<int>(brk));
  int want_status = -1;  // the status a C break must give
  std::string who = c.op;
  std::vector<std::string> words = c.bad;
  auto expect = [&](int status, std::string fn, std::vector<std::string> w, std::string what) {
    want_status = status;
    if (!fn.empty()) who = std::move(fn);
    words = std::move(w);
    plan = what;
  };
  // A NULL pointer for argument `word` of `fn` ("" = any function).
  auto null_arg = [&](auto& ptr, std::string fn, std::string word, std::string what) {
    ptr = nullptr;
    expect(KLOSS_ERROR_NULL_POINTER, std::move(fn), {std::move(word)}, std::move(what));
  };
  kloss_loss* loss = nullptr;
  struct Destroy {
    kloss_loss*& l;
    ~Destroy() { kloss_loss_destroy(l); }
  } destroy{loss};
  // Judges a failed step; returns true if the run is over.
  Outcome result;
  auto failed = [&](int st) {
    const std::string msg = kloss_last_error();
    if (c.valid() && want_status < 0) {
      result = Outcome::bad("C API failed on a valid call (" + std::string(kloss_status_name(st)) + "): " + msg);
      return;
    }
    if (want_status >= 0 && st != want_status) {
      result = Outcome::bad("C API: " + plan + " gave " + kloss_status_name(st) + ", want " +
                            kloss_status_name(want_status) + ": " + msg);
      return;
    }
    if (st == KLOSS_ERROR_INTERNAL) {
      result = Outcome::bad("C API: internal error: " + msg);
      return;
    }
    std::string why;
    if (!names_it(msg, who, words, why))
      result = Outcome::bad("C API: " + why);
    else
      result = {Outcome::threw, msg};
  };
  auto accepted = [&](const std::string& step) {
    if (want_status >= 0) result = Outcome::bad("C API accepted " + plan + " at " + step);
    return want_status >= 0;
  };

  // create
  int dt = c_dtype(c.dtype), it = c_dtype(c.index_dtype);
  const char* op = c.op.c_str();
  const std::string misspelt = c.op + "_";
  switch (brk) {
    case CBreak::create_dtype:
      dt = r.pick(std::vector<int>{-1, 6, 99, INT32_MIN});
      expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {"dtype"}, "create with dtype " + std::to_string(dt));
      break;
    case CBreak::create_index_dtype:
      it = r.pick(std::vector<int>{-7, 6, INT32_MAX, KLOSS_FLOAT32});
      expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {"index_dtype"}, "create with index_dtype " + std::to_string(it));
      break;
    case CBreak::create_null_op:
      null_arg(op, "kloss_loss_create", "op", "create with op NULL");
      break;
    case CBreak::create_unknown_op:
      op = misspelt.c_str();
      expect(KLOSS_ERROR_NOT_IMPLEMENTED, misspelt, {"no such op"}, "create of op " + misspelt);
      break;
    default:
      break;
  }
  int st = kloss_loss_create(&loss, op, dt, it);
  if (st != KLOSS_OK) {
    if (loss) return Outcome::bad("C API: failed create left a loss");
    failed(st);
    return result;
  }
  if (accepted("create")) return result;

  // options
  bool first_option = true;
  for (const auto& [k, v] : c.options) {
    const char* name = k.c_str();
    if (brk == CBreak::option_null_name && first_option) null_arg(name, "", "name", "an option with name NULL");
    if (std::holds_alternative<std::string>(v) && brk == CBreak::option_null_value && first_option) {
      expect(KLOSS_ERROR_NULL_POINTER, "kloss_loss_set_option_string", {"value"}, "a string option of value NULL");
      st = kloss_loss_set_option_string(loss, name, nullptr);
    } else if (auto i = std::get_if<I64>(&v)) {
      if (!name) who = "kloss_loss_set_option_int";
      st = kloss_loss_set_option_int(loss, name, *i);
    } else if (auto d = std::get_if<double>(&v)) {
      if (!name) who = "kloss_loss_set_option_real";
      st = kloss_loss_set_option_real(loss, name, *d);
    } else {
      if (!name) who = "kloss_loss_set_option_string";
      st = kloss_loss_set_option_string(loss, name, std::get<std::string>(v).c_str());
    }
    first_option = false;
    if (st != KLOSS_OK) {
      failed(st);
      return result;
    }
    if (accepted("set_option")) return result;
  }

  // inputs
  bool first_input = true;
  for (const auto& a : c.inputs) {
    rt::DType d;
    std::vector<unsigned char> bytes = c_bytes(c, a, d);
    std::vector<int64_t> shape(a.shape.begin(), a.shape.end());
    int ndim = static_cast<int>(shape.size());
    const char* name = a.name.c_str();
    const void* data = bytes.data();
    const int64_t* sp = shape.data();
    int idt = c_dtype(d);
    if (first_input) {
      switch (brk) {
        case CBreak::input_rank:
          ndim = r.coin() ? -1 : KLOSS_MAX_RANK + 1;
          shape.resize(KLOSS_MAX_RANK + 1, 1);
          sp = shape.data();
          expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {a.name}, "input of rank " + std::to_string(ndim));
          break;
        case CBreak::input_extent:
          shape.push_back(-3);
          ndim = static_cast<int>(shape.size());
          sp = shape.data();
          expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {a.name}, "input with extent -3");
          break;
        case CBreak::input_null_data:
          if (a.numel() == 0) break;
          data = nullptr;
          expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {a.name}, "input data NULL");
          break;
        case CBreak::input_null_name:
          null_arg(name, "kloss_loss_set_input", "name", "input name NULL");
          break;
        case CBreak::input_null_shape:
          if (ndim != 0) null_arg(sp, "kloss_loss_set_input", "shape", "input shape NULL");
          break;
        case CBreak::input_dtype_int:
          idt = r.pick(std::vector<int>{-1, 17, INT32_MAX});
          expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {"dtype"}, "input dtype " + std::to_string(idt));
          break;
        case CBreak::input_wrong_dtype:
          if (c.dtype == rt::DType::float64 || c.index_dtype == rt::DType::int64) break;
          idt = KLOSS_FLOAT64;
          expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {a.name}, "input of dtype float64 for a float64-free loss");
          break;
        case CBreak::input_huge:
          shape = {I64{1} << 40, I64{1} << 40};
          ndim = 2;
          sp = shape.data();
          expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {a.name}, "input of 2^80 elements");
          break;
        default:
          break;
      }
    }
    first_input = false;
    st = kloss_loss_set_input(loss, name, idt, data, ndim, sp);
    if (st != KLOSS_OK) {
      failed(st);
      return result;
    }
    if (accepted("set_input")) return result;
  }

  // forward
  const int odt = c_dtype(c.dtype);
  if (brk == CBreak::shape_before_forward) {
    int nd = 0;
    int64_t sh[KLOSS_MAX_RANK];
    expect(KLOSS_ERROR_INVALID_STATE, "", {"no output yet"}, "output_shape before a forward");
    st = kloss_loss_output_shape(loss, &nd, sh);
    if (st != KLOSS_OK)
      failed(st);
    else
      accepted("output_shape");
    return result;
  }
  if (brk == CBreak::grad_before_backward && !E->grads.empty()) {
    expect(KLOSS_ERROR_INVALID_STATE, "", {"no gradients yet"}, "a gradient before any backward");
    HostGuarded g(8);
    st = kloss_loss_get_grad(loss, E->grads.begin()->first.c_str(), odt, g.data(), 1);
    if (st != KLOSS_OK)
      failed(st);
    else
      accepted("get_grad");
    return result;
  }
  if (!c.backward || brk == CBreak::forward_numel || brk == CBreak::forward_null_output ||
      brk == CBreak::forward_dtype || brk == CBreak::null_loss) {
    I64 n = c.valid() ? kloss_ref::numel(E->out_shape) : 0;
    HostGuarded out(static_cast<std::size_t>(n + 2) * rt::dtype_size(c.dtype));
    void* p = c.valid() ? out.data() : nullptr;
    int fdt = odt;
    kloss_loss* l = loss;
    switch (brk) {
      case CBreak::forward_numel:  // one too many, one too few, negative
        n = r.pick(std::vector<I64>{n + 1, n > 0 ? n - 1 : n + 2, -1 - static_cast<I64>(r.below(3)), INT64_MIN});
        expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {"output"}, "output of " + std::to_string(n) + " elements");
        break;
      case CBreak::forward_null_output:
        if (n != 0) null_arg(p, "kloss_loss_forward", "output", "output NULL");
        break;
      case CBreak::forward_dtype:
        fdt = c.dtype == rt::DType::float64 ? KLOSS_FLOAT32 : KLOSS_FLOAT64;
        expect(KLOSS_ERROR_INVALID_ARGUMENT, "", {"output"}, "output of another dtype");
        break;
      case CBreak::null_loss:
        null_arg(l, "kloss_loss_forward", "loss", "loss NULL");
        break;
      default:
        break;
    }
    st = kloss_loss_forward(l, fdt, p, n);
    if (!out.intact()) return Outcome::bad("C API forward wrote outside its output buffer");
    if (st != KLOSS_OK) {
      failed(st);
      return result;
    }
    if (accepted("forward")) return result;
    if (!c.valid()) return Outcome::bad("C API accepted a broken call (" + c.mutation + ")");
    std::string why;
    if (!close(c_values(out.data(), c.dtype, static_cast<std::size_t>(n)), E->out, c.dtype, "C API output", why,
               E->out_floor))
      return Outcome::bad(why);
    if (!c.backward) return {};
  }

  // backward
  rt::DType gdt;
  std::vector<unsigned char> gob = c_bytes(c, c.grad_output, gdt);
  I64 gon = c.grad_output.numel();
  if (brk == CBreak::backward_numel) {
    gob.resize(gob.size() + rt::dtype_size(c.dtype));
    gon = r.coin() ? gon + 1 : -1 - static_cast<I64>(r.below(3));
    expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {"grad_output"}, "grad_output of " + std::to_string(gon) + " elements");
  }
  st = kloss_loss_backward(loss, odt, gob.data(), gon);
  if (st != KLOSS_OK) {
    failed(st);
    return result;
  }
  if (accepted("backward")) return result;
  if (!c.valid()) return Outcome::bad("C API accepted a broken call (" + c.mutation + ")");
  const I64 n = kloss_ref::numel(E->out_shape);
  HostGuarded out(static_cast<std::size_t>(n) * rt::dtype_size(c.dtype));
  st = kloss_loss_get_output(loss, odt, out.data(), n);
  if (st != KLOSS_OK) {
    failed(st);
    return result;
  }
  std::string why;
  if (!out.intact()) return Outcome::bad("C API get_output wrote outside its buffer");
  if (!close(c_values(out.data(), c.dtype, static_cast<std::size_t>(n)), E->out, c.dtype, "C API output", why,
             E->out_floor))
    return Outcome::bad(why);
  if (brk == CBreak::grad_not_differentiable) {
    const kloss::OpInfo* info = kloss::find_op(c.op);
    for (const auto& a : c.inputs) {
      bool diff = false;
      for (auto d : info->differentiable) diff = diff || d == a.name;
      if (diff) continue;
      expect(KLOSS_ERROR_NOT_IMPLEMENTED, "", {a.name}, "the gradient of " + a.name);
      HostGuarded g(8);
      st = kloss_loss_get_grad(loss, a.name.c_str(), odt, g.data(), 1);
      if (st != KLOSS_OK)
        failed(st);
      else
        accepted("get_grad");
      return result;
    }
  }
  for (const auto& [name, want] : E->grads) {
    I64 gn = c.find(name)->numel();
    const bool wrong = brk == CBreak::grad_numel;
    const I64 asked = !wrong ? gn : r.coin() ? gn + 1 : -gn - 1;
    if (wrong) expect(KLOSS_ERROR_DIMENSION_MISMATCH, "", {"grad"}, "a gradient buffer of " + std::to_string(asked));
    HostGuarded g(static_cast<std::size_t>(gn + 1) * rt::dtype_size(c.dtype));
    st = kloss_loss_get_grad(loss, name.c_str(), odt, g.data(), asked);
    if (!g.intact()) return Outcome::bad("C API get_grad wrote outside its buffer");
    if (st != KLOSS_OK) {
      failed(st);
      return result;
    }
    if (accepted("get_grad")) return result;
    if (!close(c_values(g.data(), c.dtype, static_cast<std::size_t>(gn)), want, c.dtype, "C API grad_" + name, why,
               E->grad_floor, cancel_of(*E, name)))
      return Outcome::bad(why);
  }
  if (want_status >= 0) return Outcome::bad("C API: " + plan + " was never refused");
  return {};
}

}  // namespace hostile
