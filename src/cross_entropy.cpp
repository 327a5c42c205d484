// Placeholder: the cross_entropy family registers its ops here once implemented.
#include <kloss/registry.hpp>

namespace kloss::impl {
void register_cross_entropy(std::vector<OpInfo>&) {}
}  // namespace kloss::impl
