// The block pool behind Buffer (see buffer.h).
#include "kernels/cpu/buffer.h"

#include <array>
#include <mutex>

namespace attnscope::cpu {
namespace {

constexpr std::align_val_t kAlignment{64};
constexpr size_t kPoolSlots = 32;

struct Block {
  void* data = nullptr;
  size_t bytes = 0;
};

// Pooled blocks, oldest first; fixed slots so that releasing never allocates.
struct Pool {
  std::mutex mutex;
  std::array<Block, kPoolSlots> blocks;
  size_t count = 0, bytes = 0;

  Block take(size_t i) {
    const Block b = blocks[i];
    for (size_t j = i + 1; j < count; ++j) blocks[j - 1] = blocks[j];
    --count;
    bytes -= b.bytes;
    return b;
  }
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: a Buffer may be freed during static destruction
  return *p;
}

}  // namespace

void* buffer_allocate(size_t bytes) {
  if (bytes >= kPooledBytes) {
    Pool& p = pool();
    const std::lock_guard<std::mutex> lock(p.mutex);
    size_t best = p.count;
    for (size_t i = 0; i < p.count; ++i) {
      const size_t have = p.blocks[i].bytes;
      if (have >= bytes && have / 2 < bytes && (best == p.count || have < p.blocks[best].bytes)) {
        best = i;
      }
    }
    if (best != p.count) return p.take(best).data;
  }
  return ::operator new(bytes, kAlignment);
}

void buffer_release(void* block, size_t bytes) noexcept {
  if (block == nullptr) return;
  if (bytes < kPooledBytes || bytes > kPoolCapacityBytes) {
    ::operator delete(block, kAlignment);
    return;
  }
  Pool& p = pool();
  std::array<Block, kPoolSlots> evicted;
  size_t n_evicted = 0;
  {
    const std::lock_guard<std::mutex> lock(p.mutex);
    while (p.count == kPoolSlots || p.bytes + bytes > kPoolCapacityBytes) {
      evicted[n_evicted++] = p.take(0);
    }
    p.blocks[p.count++] = {block, bytes};
    p.bytes += bytes;
  }
  for (size_t i = 0; i < n_evicted; ++i) ::operator delete(evicted[i].data, kAlignment);
}

void buffer_pool_clear() noexcept {
  Pool& p = pool();
  std::array<Block, kPoolSlots> evicted;
  size_t n_evicted = 0;
  {
    const std::lock_guard<std::mutex> lock(p.mutex);
    while (p.count > 0) evicted[n_evicted++] = p.take(0);
  }
  for (size_t i = 0; i < n_evicted; ++i) ::operator delete(evicted[i].data, kAlignment);
}

}  // namespace attnscope::cpu
