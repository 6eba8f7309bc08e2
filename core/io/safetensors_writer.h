// Writes named tensors as a .safetensors file (the format safetensors.torch.load_file reads:
// an 8-byte little-endian header length, a JSON header {"NAME": {"dtype", "shape",
// "data_offsets"}, "__metadata__": {...}}, then the data), replacing the target atomically.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "core/result.h"

namespace attnscope {

struct NamedTensor {
  std::string name;
  const HostTensor* tensor = nullptr;
};

// Tensors in the given order; `metadata` as the header's string map. Fails naming the path.
Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace attnscope
