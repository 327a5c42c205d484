// The op registry: every family's registration function, called once.
#include <kloss/impl/runtime_support.hpp>
#include <kloss/registry.hpp>

namespace kloss {

const std::vector<OpInfo>& ops() {
  static const std::vector<OpInfo> all = [] {
    std::vector<OpInfo> v;
    impl::register_pointwise(v);
    impl::register_cross_entropy(v);
    impl::register_margin(v);
    impl::register_ctc(v);
    impl::register_embedding(v);
    impl::register_fused_linear(v);
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
