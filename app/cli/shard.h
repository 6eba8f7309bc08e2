// --shard I/N: the part of a scan one process takes. A run folder of at least N dumps is split
// by dumps (contiguous in scan order, balanced by file size), so that a shard opens only its
// own dumps; one FILE, or a folder of fewer dumps, is split into N contiguous parts of cases.
// Either way the shards in index order hold the unsharded scan's cases in order (merge).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnscope {

struct Shard {
  int64_t index = 0, count = 1;

  // Part I of N equal contiguous parts: [I*T/N, (I+1)*T/N).
  template <typename T>
  std::vector<T> part(const std::vector<T>& all) const {
    const auto bound = [&](int64_t i) { return all.size() * static_cast<size_t>(i) / count; };
    return std::vector<T>(all.begin() + bound(index), all.begin() + bound(index + 1));
  }
  // The indices of the items this shard takes when item i weighs weights[i]: item i goes to
  // the shard in which the middle of its weight falls (contiguous, deterministic).
  std::vector<size_t> part_by_weight(const std::vector<uint64_t>& weights) const;
};

// "I/N" with 0 <= I < N <= 100000.
std::optional<Shard> parse_shard(const std::string& text);

}  // namespace attnscope
