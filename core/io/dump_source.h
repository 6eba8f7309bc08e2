// The format-specific inside of a DumpReader (internal to core/io): discovery of a file's
// cases into a DumpListing and the reading of one listed tensor. HDF5 (hdf5_reader.cpp) reads
// datasets by name; .pt / .npz / .safetensors (located_source.cpp) read bytes at the
// TensorLocation their discovery put into the listing. DumpReader (dump_reader.cpp) holds one
// source and does the rest: case lookup, the memory budget, canonical layout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/case_model.h"
#include "core/io/dump_listing.h"
#include "core/io/hdf5_dump.h"
#include "core/result.h"

namespace attnscope {

using DatasetCallback = std::function<void(const std::string&)>;

class DumpSource {
 public:
  virtual ~DumpSource() = default;
  // Tensor `t` of listed case `info` as stored (file layout, the listed shape and dtype),
  // re-checked against the file. Thread-safe.
  virtual Result<HostTensor> read_tensor(const CaseInfo& info, const TensorInfo& t) const = 0;
  // Every tensor of `info`, in its order (read_tensor of each; a source may share the work).
  virtual Result<std::vector<HostTensor>> read_tensors(const CaseInfo& info) const {
    std::vector<HostTensor> out;
    for (const TensorInfo& t : info.tensors) {
      Result<HostTensor> one = read_tensor(info, t);
      if (!one) return one.error();
      out.push_back(std::move(*one));
    }
    return out;
  }
  // The probe's test reads of one case (DumpReader::check_case); `on_dataset` is called with
  // "/case/q" before each tensor's data is read.
  virtual Status check_case(const CaseInfo& info, int64_t sample_bytes,
                            const DatasetCallback& on_dataset) const = 0;
  // DumpReader::keep_open; null for sources that keep their file open anyway.
  virtual std::shared_ptr<void> keep_open() const { return nullptr; }
};

// A source and the listing of its file: found by discovery (open) or handed in (listed).
struct OpenedSource {
  std::unique_ptr<DumpSource> source;
  DumpListing listing;
};

// HDF5 (hdf5_reader.cpp): the file / an image (copied) discovered, or a listing adopted.
Result<OpenedSource> open_hdf5_source(const std::string& path, const OpenOptions& options);
Result<OpenedSource> open_hdf5_image_source(const void* data, size_t size, const std::string& name,
                                            const OpenOptions& options);
Result<OpenedSource> listed_hdf5_source(const std::string& path, DumpListing listing,
                                        const OpenOptions& options);

// .pt / .npz / .safetensors (located_source.cpp): the same from a file or an image whose
// first bytes said zip or safetensors (dump_format.h).
Result<OpenedSource> open_located_source(const std::string& path, bool zip,
                                         const OpenOptions& options);
Result<OpenedSource> open_located_image_source(const void* data, size_t size,
                                               const std::string& name, bool zip,
                                               const OpenOptions& options);
Result<OpenedSource> listed_located_source(const std::string& path, bool zip, DumpListing listing,
                                           const OpenOptions& options);

}  // namespace attnscope
