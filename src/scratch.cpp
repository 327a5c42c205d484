// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss's scratch caches (include/kloss/impl/scratch.hpp): the registry of
// the caches in use, scratch_bytes() and release_scratch().
#include <kloss/impl/scratch.hpp>

namespace kloss {
namespace impl {

std::vector<ScratchCacheBase*>& ScratchCacheBase::all() {
  static std::vector<ScratchCacheBase*> caches;
  return caches;
}

std::mutex& ScratchCacheBase::all_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace impl

std::size_t scratch_bytes() {
  std::lock_guard<std::mutex> g(impl::ScratchCacheBase::all_mutex());
  std::size_t n = 0;
  for (auto* c : impl::ScratchCacheBase::all()) n += c->bytes();
  return n;
}

void release_scratch() {
  std::lock_guard<std::mutex> g(impl::ScratchCacheBase::all_mutex());
  for (auto* c : impl::ScratchCacheBase::all()) c->release_idle();
}

}  // namespace kloss
