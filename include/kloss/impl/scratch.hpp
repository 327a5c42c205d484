// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file impl/scratch.hpp
/// Scratch memory of kloss's calls, cached per memory space and handed out
/// per execution space instance.
///
/// Allocating device memory (cudaMalloc, hipMalloc) synchronises the
/// device, and so does freeing it: a call that allocated its work arrays
/// would make every training step wait for the GPU and could not be
/// captured in a CUDA graph. Instead a call takes its work arrays from a
/// cache (impl::scratch<T>(exec, n)) and gives them back when it returns.
/// A block given back is marked with the execution space instance that used
/// it and is handed again to calls on that instance, whose kernels run after
/// the ones that may still be reading it; a call on another instance gets it
/// only when no block of its own fits, after a fence of every execution
/// space. Once a step has run, the
/// same step on the same instance finds every block in the cache: no
/// allocation, no synchronisation. A request takes the smallest free block
/// that holds it (a block of at most twice the size, so that a small request
/// never pins a large block); blocks stay allocated until
/// kloss::release_scratch() or Kokkos::finalize().
#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>
#include <kloss/scratch.hpp>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace kloss {
namespace impl {

/// The scratch cache of one memory space (see the file comment).
class ScratchCacheBase {
 public:
  virtual ~ScratchCacheBase() = default;
  virtual std::size_t bytes() = 0;
  virtual void release_idle() = 0;
  /// Every cache that has been used, for kloss::release_scratch().
  static std::vector<ScratchCacheBase*>& all();
  static std::mutex& all_mutex();
};

template <class Mem>
class ScratchCache final : public ScratchCacheBase {
 public:
  static ScratchCache& get() {
    static ScratchCache* cache = [] {
      auto* c = new ScratchCache();  // never destroyed: it must outlive every static of the caller
      std::lock_guard<std::mutex> g(all_mutex());
      all().push_back(c);
      return c;
    }();
    return *cache;
  }

  /// A block of at least `want` bytes for work on `instance`; `got` is its
  /// size.
  /// A block last used by another instance is handed over only after a
  /// fence of every execution space (its kernels may still read it): so
  /// calls on ever new instances (a stream per step) reuse the cache instead
  /// of growing it.
  void* take(std::uint32_t instance, std::size_t want, std::size_t& got) {
    bool other = false;
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> g(m_);
      std::size_t best = free_.size();
      for (int pass = 0; pass < 2 && best == free_.size(); ++pass) {
        for (std::size_t i = 0; i < free_.size(); ++i) {
          const Block& b = free_[i];
          if ((pass == 0) != (b.instance == instance) || b.bytes < want || b.bytes > 2 * want + 4096) continue;
          if (best == free_.size() || b.bytes < free_[best].bytes) best = i;
        }
        other = pass == 1;
      }
      if (best != free_.size()) {
        got = free_[best].bytes;
        p = free_[best].ptr;
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      }
    }
    if (p) {
      if (other) Kokkos::fence();
      return p;
    }
    got = want;
    try {
      return allocate(want);
    } catch (const std::exception&) {
      // (std::bad_alloc from Kokkos 4, std::runtime_error from Kokkos 3.)
      // Idle blocks of other instances may be what is missing: wait for the
      // kernels that may still read them, free them, and try once more.
      release_idle_fenced();
      return allocate(want);
    }
  }

  /// Gives a block back, marked as last used by `instance`.
  void give(void* p, std::size_t bytes, std::uint32_t instance) {
    std::lock_guard<std::mutex> g(m_);
    free_.push_back({p, bytes, instance});
  }

  std::size_t bytes() override {
    std::lock_guard<std::mutex> g(m_);
    return held_;
  }

  void release_idle() override { release_idle_fenced(); }

 private:
  struct Block {
    void* ptr;
    std::size_t bytes;
    std::uint32_t instance;
  };

  void* allocate(std::size_t bytes) {
    void* p = Kokkos::kokkos_malloc<Mem>("kloss::scratch", bytes > 0 ? bytes : 1);
    bool hook = false;
    {
      std::lock_guard<std::mutex> g(m_);
      held_ += bytes;
      hook = !hooked_;
      hooked_ = true;
    }
    if (hook) {                                    // idle blocks are freed before Kokkos finalizes
      std::lock_guard<std::mutex> h(all_mutex());  // Kokkos' hook stack has no lock of its own
      Kokkos::push_finalize_hook([this] {
        release_idle_fenced();
        std::lock_guard<std::mutex> g(m_);
        hooked_ = false;
      });
    }
    return p;
  }

  /// Frees the idle blocks: taken off the free list first, then a fence
  /// (their last kernels may still run), then freed.
  void release_idle_fenced() {
    std::vector<Block> idle;
    {
      std::lock_guard<std::mutex> g(m_);
      idle.swap(free_);
      for (const Block& b : idle) held_ -= b.bytes;
    }
    if (idle.empty()) return;
    Kokkos::fence();
    for (const Block& b : idle) Kokkos::kokkos_free<Mem>(b.ptr);
  }

  std::mutex m_;
  std::vector<Block> free_;
  std::size_t held_ = 0;
  bool hooked_ = false;
};

/// A work array of n values of T leased from the scratch cache of
/// ExecSpace's memory space for work on `exec`, given back when it goes out
/// of scope (after the caller has enqueued the kernels that use it: they run
/// before any later user of the block on the same instance). Contents are
/// not initialised. Move-only.
template <class T, class Mem>
class Scratch {
 public:
  /// (A view built on a pointer is unmanaged whatever its type says: it
  /// passes wherever kloss's kernels take a View<T*, Mem>.)
  using view_type = Kokkos::View<T*, Mem>;
  Scratch() = default;
  /// (An empty array still gets a block of one value, as a Kokkos view of
  /// zero elements still has memory: `&v(0)` of an empty view must not bind
  /// a reference to null.)
  Scratch(std::uint32_t instance, std::int64_t n) : n_(n > 0 ? n : 0), instance_(instance) {
    const std::size_t values = n_ > 0 ? static_cast<std::size_t>(n_) : 1;
    p_ = ScratchCache<Mem>::get().take(instance, values * sizeof(T), bytes_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Scratch(Scratch&& o) noexcept { swap(o); }
  Scratch& operator=(Scratch&& o) noexcept {
    Scratch t(std::move(o));
    swap(t);
    return *this;
  }
  ~Scratch() {
    if (p_) ScratchCache<Mem>::get().give(p_, bytes_, instance_);
  }
  T* data() const { return static_cast<T*>(p_); }
  std::int64_t size() const { return n_; }
  view_type view() const { return view_type(data(), static_cast<std::size_t>(n_)); }

 private:
  void swap(Scratch& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    std::swap(n_, o.n_);
    std::swap(instance_, o.instance_);
  }
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  std::int64_t n_ = 0;
  std::uint32_t instance_ = 0;
};

/// Several work arrays of different types leased together and given back
/// together when the set goes out of scope (for kernels that hold their
/// arrays as views).
template <class Mem>
class ScratchSet {
 public:
  explicit ScratchSet(std::uint32_t instance) : instance_(instance) {}
  /// n values of T, uninitialised.
  template <class T>
  Kokkos::View<T*, Mem> take(std::int64_t n) {
    blocks_.emplace_back(instance_, (n > 0 ? n : 0) * static_cast<std::int64_t>(sizeof(T)));
    return Kokkos::View<T*, Mem>(reinterpret_cast<T*>(blocks_.back().data()), static_cast<std::size_t>(n > 0 ? n : 0));
  }

 private:
  std::uint32_t instance_;
  std::vector<Scratch<unsigned char, Mem>> blocks_;
};

/// The identity of an execution space instance (its Kokkos Tools device id:
/// backend and instance).
template <class ExecSpace>
std::uint32_t scratch_instance(const ExecSpace& exec) {
  return Kokkos::Tools::Experimental::device_id(exec);
}

/// n values of T of scratch for work on exec (see Scratch).
template <class T, class ExecSpace>
Scratch<T, typename ExecSpace::memory_space> scratch(const ExecSpace& exec, std::int64_t n) {
  return Scratch<T, typename ExecSpace::memory_space>(scratch_instance(exec), n);
}

/// As scratch, zeroed on exec (asynchronously).
template <class T, class ExecSpace>
Scratch<T, typename ExecSpace::memory_space> scratch_zeroed(const ExecSpace& exec, std::int64_t n) {
  auto s = scratch<T>(exec, n);
  if (n > 0) Kokkos::deep_copy(exec, s.view(), T());
  return s;
}

/// The n values of `v` (a contiguous view of exec's memory) copied to the
/// host scratch cache, for a call that reads a few values on the host
/// (lengths, error records): no allocation once the cache holds a block.
/// Fences exec.
template <class ExecSpace, class V>
Scratch<typename V::non_const_value_type, Kokkos::HostSpace> host_copy(const ExecSpace& exec, const V& v) {
  using T = typename V::non_const_value_type;
  const auto n = static_cast<std::int64_t>(v.size());
  Scratch<T, Kokkos::HostSpace> h(scratch_instance(Kokkos::DefaultHostExecutionSpace()), n);
  if (n > 0)
    Kokkos::deep_copy(exec, Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(h.data(), n),
                      Kokkos::View<const T*, typename V::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                          v.data(), static_cast<std::size_t>(n)));
  exec.fence();
  return h;
}

}  // namespace impl
}  // namespace kloss
