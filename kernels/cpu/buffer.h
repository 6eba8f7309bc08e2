// Buffer<T>: the drivers' large per-call arrays. A std::vector whose resize leaves new
// elements uninitialised (parallel workers write them in full before anything reads them; a
// zeroing resize would write and fault in every page on the calling thread first), with
// 64-byte aligned storage, and whose large blocks are recycled: a freed block of at least
// kPooledBytes waits in a small process-wide pool for the next Buffer of about its size. The
// drivers allocate the same sizes call after call, so a repeated call (a slider move, a bench
// rep) finds its pages mapped instead of faulting them in again.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace attnscope::cpu {

// Smaller blocks go straight to operator new (glibc serves them from its heap, whose pages stay
// mapped); larger ones it maps afresh on every allocation.
constexpr size_t kPooledBytes = size_t{128} << 10;
constexpr size_t kPoolCapacityBytes = size_t{256} << 20;  // what the pool keeps at most

// At least `bytes` of 64-byte aligned storage: the smallest pooled block of [bytes, 2 bytes)
// when one waits, else a new one. Thread-safe.
void* buffer_allocate(size_t bytes);
// Returns storage from buffer_allocate(bytes) (the same `bytes`): pooled when large enough,
// the oldest pooled blocks freed when the pool would exceed kPoolCapacityBytes or its slots.
void buffer_release(void* block, size_t bytes) noexcept;
// Frees every pooled block: what a one-off computation (a case scan) calls once its kernel runs
// are over, so the pool does not hold their sizes through the rest of it.
void buffer_pool_clear() noexcept;

template <typename T>
struct BufferAllocator {
  using value_type = T;
  BufferAllocator() noexcept = default;
  template <typename U>
  BufferAllocator(const BufferAllocator<U>&) noexcept {}  // NOLINT: rebinding converts

  T* allocate(size_t n) { return static_cast<T*>(buffer_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { buffer_release(p, n * sizeof(T)); }

  // Without arguments: default-initialise (no zeroing).
  template <typename U, typename... Args>
  void construct(U* at, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      ::new (static_cast<void*>(at)) U;
    } else {
      ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
    }
  }
  template <typename U>
  bool operator==(const BufferAllocator<U>&) const noexcept {
    return true;
  }
};

template <typename T>
using Buffer = std::vector<T, BufferAllocator<T>>;

}  // namespace attnscope::cpu
