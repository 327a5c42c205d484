// The op registry: every family's registration function, called once.
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
    return v;
  }();
  return all;
}

const OpInfo* find_op(std::string_view name) {
  for (const auto& op : ops())
    if (op.name == name) return &op;
  return nullptr;
}

std::string_view to_string(LossKind k) {
  switch (k) {
    case LossKind::mse: return "mse_loss";
    case LossKind::l1: return "l1_loss";
    case LossKind::smooth_l1: return "smooth_l1_loss";
    case LossKind::huber: return "huber_loss";
    case LossKind::nll: return "nll_loss";
    case LossKind::cross_entropy: return "cross_entropy";
    case LossKind::binary_cross_entropy: return "binary_cross_entropy";
    case LossKind::binary_cross_entropy_with_logits: return "binary_cross_entropy_with_logits";
    case LossKind::kl_div: return "kl_div";
    case LossKind::poisson_nll: return "poisson_nll_loss";
    case LossKind::gaussian_nll: return "gaussian_nll_loss";
    case LossKind::hinge_embedding: return "hinge_embedding_loss";
    case LossKind::margin_ranking: return "margin_ranking_loss";
    case LossKind::triplet_margin: return "triplet_margin_loss";
    case LossKind::cosine_embedding: return "cosine_embedding_loss";
    case LossKind::multi_margin: return "multi_margin_loss";
    case LossKind::multilabel_margin: return "multilabel_margin_loss";
    case LossKind::multilabel_soft_margin: return "multilabel_soft_margin_loss";
    case LossKind::ctc: return "ctc_loss";
    case LossKind::fused_linear_cross_entropy: return "fused_linear_cross_entropy";
  }
  return "?";
}

}  // namespace kloss
