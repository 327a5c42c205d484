// Placeholder: the ctc family registers its ops here once implemented.
#include <kloss/registry.hpp>

namespace kloss::impl {
void register_ctc(std::vector<OpInfo>&) {}
}  // namespace kloss::impl
