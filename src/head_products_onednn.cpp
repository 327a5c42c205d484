// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The fused heads' products on oneDNN's matmul (impl/head_products.hpp).
//
// oneDNN picks its kernel from the CPU's features (AMX, AVX512-BF16,
// AVX-512, AVX2), not from its model number, so a CPU newer than the
// installed library still gets its fast kernels (Debian 12's OpenBLAS
// 0.3.21 runs Sapphire Rapids on its SSE3 "Prescott" kernels). Strided
// memory descriptors express the heads' transposes and leading dimensions
// without copies; `accumulate` is a sum post-op (C = round(C + A B), one
// rounding, as a gemm with beta = 1); the bias is the matmul's own.
// Primitives are cached by shape: a training step meets the same few
// shapes (the chunk, the last chunk) every call. Both API generations
// build: oneDNN 2.x (Debian 12's 2.6.3) and 3.x (operation descriptors
// folded into the primitive descriptors).
#include <kloss/impl/head_products.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace kloss::impl {
namespace {

using dnnl::memory;

memory::data_type data_type(ProductType t) {
  switch (t) {
    case ProductType::f32:
      return memory::data_type::f32;
    case ProductType::bf16:
      return memory::data_type::bf16;
    case ProductType::f16:
      return memory::data_type::f16;
    case ProductType::f64:
      break;
  }
  fail<InvalidArgument>("kloss::head_products", "oneDNN has no float64 matmul");
}

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

memory::desc operand_desc(const StridedOperand& s, ProductType t) {
  return memory::desc({s.rows, s.cols}, data_type(t), {s.row_stride, s.col_stride});
}

using Key = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                       char, char, bool, bool>;

struct Entry {
  dnnl::matmul prim;
  memory::desc a, b, c, bias;
};

dnnl::matmul::primitive_desc make_pd(const RowMajorProduct& p, ProductType op, ProductType out, bool bias,
                                     bool accumulate, memory::desc& a, memory::desc& b, memory::desc& c,
                                     memory::desc& bd) {
  a = operand_desc(operand_a(p), op);
  b = operand_desc(operand_b(p), op);
  c = memory::desc({p.m, p.n}, data_type(out), {p.ldc, 1});
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  if (bias) bd = memory::desc({1, p.n}, data_type(op), memory::format_tag::ab);
#if DNNL_VERSION_MAJOR >= 3
  if (bias) return dnnl::matmul::primitive_desc(cpu_engine(), a, b, bd, c, attr);
  return dnnl::matmul::primitive_desc(cpu_engine(), a, b, c, attr);
#else
  if (bias) return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, bd, c), attr, cpu_engine());
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
#endif
}

const Entry& entry(const RowMajorProduct& p, ProductType op, ProductType out, bool bias, bool accumulate) {
  static std::mutex mutex;
  static std::map<Key, Entry> cache;
  const Key key{static_cast<int>(op), static_cast<int>(out), p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.ta, p.tb, bias,
                accumulate};
  std::lock_guard<std::mutex> g(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Entry e;
  try {
    const auto pd = make_pd(p, op, out, bias, accumulate, e.a, e.b, e.c, e.bias);
    e.prim = dnnl::matmul(pd);
  } catch (const dnnl::error& err) {
    fail<LibraryError>("kloss::head_products", "oneDNN cannot multiply this product (m ", p.m, ", n ", p.n, ", k ",
                          p.k, "): ", err.what());
  }
  return cache.emplace(key, std::move(e)).first->second;
}

template <class Out>
void zero_or_bias(const RowMajorProduct& p, const void* bias, ProductType op, void* c, bool accumulate) {
  // k = 0: the product is empty; C keeps its values or becomes the bias
  auto* cp = static_cast<Out*>(c);
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      float v = accumulate ? static_cast<float>(cp[i * p.ldc + j]) : 0.0f;
      if (bias)
        v += op == ProductType::f32 ? static_cast<const float*>(bias)[j]
                                    : static_cast<float>(static_cast<const bfloat16*>(bias)[j]);
      cp[i * p.ldc + j] = static_cast<Out>(v);
    }
}

}  // namespace

const std::string& onednn_kernel(ProductType op) {
  static std::mutex mutex;
  static std::map<int, std::string> known;
  std::lock_guard<std::mutex> g(mutex);
  auto it = known.find(static_cast<int>(op));
  if (it != known.end()) return it->second;
  std::string name;
  if (op != ProductType::f64) {
    try {
      const RowMajorProduct p{'N', 'T', 64, 64, 64, 64, 64, 64};
      memory::desc a, b, c, bd;
      name = make_pd(p, op, ProductType::f32, false, false, a, b, c, bd).impl_info_str();
      if (name.rfind("ref", 0) == 0) name.clear();  // reference loops: slower than converting to float
    } catch (const dnnl::error&) {
      name.clear();
    }
  }
  return known.emplace(static_cast<int>(op), name).first->second;
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

void onednn_product(const RowMajorProduct& p, ProductType op, ProductType out, const void* a, const void* b,
                    const void* bias, void* c, bool accumulate) {
  if (p.m == 0 || p.n == 0) return;
  if (p.k == 0) {
    if (out == ProductType::f32)
      zero_or_bias<float>(p, bias, op, c, accumulate);
    else
      zero_or_bias<bfloat16>(p, bias, op, c, accumulate);
    return;
  }
  const Entry& e = entry(p, op, out, bias != nullptr, accumulate);
  dnnl::engine& eng = cpu_engine();
  dnnl::stream s(eng);
  memory am(e.a, eng, const_cast<void*>(a)), bm(e.b, eng, const_cast<void*>(b)), cm(e.c, eng, c);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(e.bias, eng, const_cast<void*>(bias)));
  e.prim.execute(s, args);
  s.wait();
}

}  // namespace kloss::impl
