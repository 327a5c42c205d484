// Placeholder: the margin family registers its ops here once implemented.
#include <kloss/registry.hpp>

namespace kloss::impl {
void register_margin(std::vector<OpInfo>&) {}
}  // namespace kloss::impl
