// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file check_flag.hpp
/// kloss::CheckFlag: index checks whose verdict is taken later.
///
/// An op that reads class indices checks them inside its kernel; by default
/// the result must reach the host before the op returns, so the op fences
/// and throws at the call. An op given a CheckFlag (the `deferred_check`
/// field of its options) records what its kernels met in the flag, in the
/// flag's memory, and returns without waiting: a training step on a device
/// then issues no host synchronisation for its checks, and a CUDA graph can
/// capture it. `verdict()` later (after the step, every few steps) waits for
/// the work and throws what the first failing call would have thrown.
///
///     kloss::CrossEntropyOptions o;
///     o.deferred_check = kloss::CheckFlag(exec);
///     kloss::cross_entropy(exec, logits, labels, {}, loss, lse, tw, o);  // does not wait
///     ...
///     o.deferred_check.verdict();  // throws IndexOutOfRange for a bad label
///
/// The outputs of a call that met a bad index hold what its kernels wrote
/// (a bad row contributes nothing to a sum); the verdict says they are not
/// to be used. A flag is a handle: copies share one record. Calls that
/// share a flag must run on one execution space instance (their records
/// are then written in call order) and be issued from one host thread at
/// a time. A CUDA graph can capture a step once a first step of the same
/// sizes has run on that instance (the first call of a size takes its work
/// arrays from a new allocation, kloss/scratch.hpp). Like a Kokkos::View,
/// a flag must be released before Kokkos::finalize.
#include <kloss/error.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <vector>

namespace kloss {
namespace impl {

/// What a deferred check records: an out-of-range index or a bad
/// probability.
enum class CheckKind { index, probability };

/// The record of a CheckFlag, in the flag's memory: the first violation
/// since the last verdict and the count of all of them.
struct CheckRecord {
  std::int64_t total = 0;      ///< violations over every call since the last verdict
  std::int64_t call = -1;      ///< which noted call (CheckFlag's list) met the first one
  std::int64_t count = 0;      ///< that call's violations
  std::int64_t position = -1;  ///< its first position
  std::int64_t value = 0;      ///< the index there (CheckKind::index)
  double real = 0;             ///< the probability there (CheckKind::probability)

  /// Adds a call's n violations (first at pos, value v or rv).
  KOKKOS_INLINE_FUNCTION void add(std::int64_t c, std::int64_t n, std::int64_t pos, std::int64_t v, double rv) {
    if (n <= 0) return;
    if (total == 0) {
      call = c;
      count = n;
      position = pos;
      value = v;
      real = rv;
    }
    total += n;
  }
};

}  // namespace impl

/// Index and probability checks whose verdict is taken later, after the
/// ops that note them ran without waiting (this file's description). A
/// handle: copies share one record.
class CheckFlag {
 public:
  /// An empty flag: the ops check at the call (the options' default).
  CheckFlag() = default;

  /// A flag in the memory of ExecSpace, for ops that run on that space.
  template <class ExecSpace, class = std::enable_if_t<Kokkos::is_execution_space<ExecSpace>::value>>
  explicit CheckFlag(const ExecSpace& /*exec*/) : state_(std::make_shared<State>()) {
    using Mem = typename ExecSpace::memory_space;
    using HostRecord = Kokkos::View<impl::CheckRecord, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    const Kokkos::View<impl::CheckRecord, Mem> rec("kloss::CheckFlag");
    state_->record = rec.data();
    state_->space = std::type_index(typeid(Mem));
    state_->space_name = Mem::name();
    state_->read = [rec]() {
      impl::CheckRecord r;
      Kokkos::deep_copy(HostRecord(&r), rec);
      return r;
    };
    state_->clear = [rec]() {
      impl::CheckRecord r;
      Kokkos::deep_copy(rec, HostRecord(&r));
    };
  }

  /// Whether the flag holds a record (an empty one checks at the call).
  explicit operator bool() const { return state_ != nullptr; }

  /// Waits for all work (Kokkos::fence), then, if the calls since the last
  /// verdict met a bad index or probability, clears the flag and throws
  /// what the first of them would have thrown at the call
  /// (IndexOutOfRange naming the op, argument, count, first position and
  /// value; InvalidArgument for a negative or NaN probability), adding the
  /// count over all those calls. Returns otherwise. An empty flag returns.
  void verdict() const;

  /// Violations recorded since the last verdict (waits for all work).
  std::int64_t violations() const;

  /// The record, for an op running in memory space Mem; InvalidArgument
  /// naming `op` if the flag lives in another space.
  template <class Mem>
  impl::CheckRecord* record(std::string_view op) const {
    if (state_->space != std::type_index(typeid(Mem))) space_mismatch(op, Mem::name());
    return state_->record;
  }

  /// Registers what a call checks (op, argument, allowed range); returns
  /// the id its kernel records. Identical calls share one id.
  std::int64_t note_call(std::string_view op, std::string_view arg, std::string_view allowed,
                         impl::CheckKind kind) const;

 private:
  struct Call {
    std::string op, arg, allowed;
    impl::CheckKind kind;
  };
  struct State {
    impl::CheckRecord* record = nullptr;
    std::type_index space = std::type_index(typeid(void));
    std::string space_name;
    std::function<impl::CheckRecord()> read;  // keeps the view alive
    std::function<void()> clear;
    std::vector<Call> calls;
  };
  [[noreturn]] void space_mismatch(std::string_view op, std::string_view space) const;

  std::shared_ptr<State> state_;
};

}  // namespace kloss
