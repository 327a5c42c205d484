// Placeholder: the embedding family registers its ops here once implemented.
#include <kloss/registry.hpp>

namespace kloss::impl {
void register_embedding(std::vector<OpInfo>&) {}
}  // namespace kloss::impl
