// Placeholder: the fused_linear family registers its ops here once implemented.
#include <kloss/registry.hpp>

namespace kloss::impl {
void register_fused_linear(std::vector<OpInfo>&) {}
}  // namespace kloss::impl
