// Shard parsing and the split of weighted items.
#include "shard.h"

#include <cstdio>

namespace attnscope {

std::vector<size_t> Shard::part_by_weight(const std::vector<uint64_t>& weights) const {
  long double total = 0;
  for (uint64_t w : weights) total += static_cast<long double>(w) + 1;  // empty files count too
  std::vector<size_t> out;
  long double before = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const long double w = static_cast<long double>(weights[i]) + 1;
    const auto shard = static_cast<int64_t>((before + w / 2) * count / total);
    if (shard == index) out.push_back(i);
    before += w;
  }
  return out;
}

std::optional<Shard> parse_shard(const std::string& text) {
  long long index = -1, count = 0;
  char slash = 0, rest = 0;
  if (std::sscanf(text.c_str(), "%lld%c%lld%c", &index, &slash, &count, &rest) != 3 ||
      slash != '/' || count < 1 || count > 100000 || index < 0 || index >= count) {
    return std::nullopt;
  }
  return Shard{index, count};
}

}  // namespace attnscope
