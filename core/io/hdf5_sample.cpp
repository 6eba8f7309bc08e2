// Test reads of a case's stored tensor data for the probe (issue 7): metadata can be intact
// while the chunk index or a filtered chunk is corrupt, and libhdf5 may then fail or crash in
// H5Dread. A tensor of at most `sample_bytes` is read whole (what load() does); a larger one
// has its chunk index walked and its first and last chunk read, each read capped at
// `sample_bytes`, so probing a multi-gigabyte dump reads a few megabytes per tensor.
#include <algorithm>

#include "core/io/hdf5_common.h"

namespace attnscope::h5 {

namespace {

// One hyperslab of a dataset: start and count per dimension.
struct Block {
  std::vector<hsize_t> start, count;
};

hsize_t elements(const Block& b) {
  hsize_t n = 1;
  for (hsize_t c : b.count) n *= c;
  return n;
}

// The first (`last` false) or last chunk of a dataset of extent `dims` stored in chunks of
// `chunk` (the whole extent when contiguous), narrowed to at most `max_elements` elements:
// leading dimensions shrink to one index first (the first or last one), then the innermost.
Block sample_block(const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk, bool last,
                   hsize_t max_elements) {
  Block b;
  for (size_t i = 0; i < dims.size(); ++i) {
    const hsize_t c = std::max<hsize_t>(1, std::min(chunk[i], dims[i]));
    const hsize_t start = last ? (dims[i] - 1) / c * c : 0;
    b.start.push_back(start);
    b.count.push_back(std::min(c, dims[i] - start));
  }
  for (size_t i = 0; i < dims.size() && elements(b) > max_elements; ++i) {
    const hsize_t others = elements(b) / b.count[i];
    const hsize_t keep = i + 1 < dims.size() ? 1 : std::max<hsize_t>(1, max_elements / others);
    if (keep >= b.count[i]) continue;
    if (last) b.start[i] += b.count[i] - keep;
    b.count[i] = keep;
  }
  return b;
}

// Reads `block` (the whole dataset when null) with `memory_type`; false on failure.
bool read_block(hid_t dataset, hid_t memory_type, size_t element_size, const Block* block,
                hsize_t total) {
  const hsize_t n = block ? elements(*block) : total;
  std::vector<uint8_t> buffer(static_cast<size_t>(n) * element_size);
  if (block == nullptr) {
    return H5Dread(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()) >= 0;
  }
  Handle file_space = space_handle(H5Dget_space(dataset));
  Handle memory_space = space_handle(H5Screate_simple(1, &n, nullptr));
  if (!file_space || !memory_space ||
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, block->start.data(), nullptr,
                          block->count.data(), nullptr) < 0) {
    return false;
  }
  return H5Dread(dataset, memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT,
                 buffer.data()) >= 0;
}

// Chunk dimensions of a chunked dataset; empty for contiguous / compact storage.
std::vector<hsize_t> chunk_dims(hid_t dataset, size_t rank) {
  Handle dcpl = plist_handle(H5Dget_create_plist(dataset));
  if (!dcpl || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return {};
  std::vector<hsize_t> chunk(rank, 0);
  if (H5Pget_chunk(dcpl.get(), static_cast<int>(rank), chunk.data()) != static_cast<int>(rank)) {
    return {};
  }
  return chunk;
}

const char* const kCorruptDataHint =
    "the tensor data is corrupt (a damaged chunk index or compressed chunk, or a truncated "
    "copy); re-export the dump from the original tensors";

Status sample_tensor(hid_t file, const std::string& name, const CaseInfo& info, const TensorInfo& t,
                     const OpenOptions& options, int64_t sample_bytes) {
  const std::string object = join_path(info.stored_path(), t.dataset);
  Result<Handle> opened = open_case_dataset(file, name, object, options);
  if (!opened) return opened.error();
  const Handle& dataset = *opened;
  auto meta = inspect_dataset(dataset.get(), t.name, options, name, object);
  if (!meta) return meta.error();
  std::vector<hsize_t> dims(meta->shape.begin(), meta->shape.end());
  hsize_t total = 1;
  for (hsize_t d : dims) total *= d;
  if (total == 0) return Ok{};
  const size_t size = meta->element.memory_size;
  const hid_t type = meta->element.memory_type.get();
  const hsize_t max_elements = std::max<hsize_t>(1, static_cast<hsize_t>(sample_bytes) / size);
  if (total <= max_elements || dims.empty()) {
    if (read_block(dataset.get(), type, size, nullptr, total)) return Ok{};
    return dataset_error(ErrorCode::format, name, object, "cannot read the data", kCorruptDataHint,
                         true);
  }
  std::vector<hsize_t> chunk = chunk_dims(dataset.get(), dims.size());
  if (!chunk.empty()) {
    // Walks the whole chunk index (no data): a corrupt B-tree node anywhere fails here.
    Handle space = space_handle(H5Dget_space(dataset.get()));
    hsize_t chunks = 0;
    if (!space || H5Dget_num_chunks(dataset.get(), space.get(), &chunks) < 0) {
      return dataset_error(ErrorCode::format, name, object, "cannot walk the chunk index",
                           kCorruptDataHint, true);
    }
  } else {
    chunk = dims;
  }
  for (bool last : {false, true}) {
    const Block block = sample_block(dims, chunk, last, max_elements);
    if (!read_block(dataset.get(), type, size, &block, total)) {
      return dataset_error(
          ErrorCode::format, name, object,
          std::string("cannot read the data (its ") + (last ? "last" : "first") + " chunk)",
          kCorruptDataHint, true);
    }
  }
  return Ok{};
}

}  // namespace

Result<Handle> open_case_dataset(hid_t file, const std::string& name, const std::string& object,
                                 const OpenOptions& options) {
  Handle dapl = link_access(options, /*dataset=*/true);
  if (options.allow_external) {
    H5Pset_efile_prefix(dapl.get(), "${ORIGIN}");
    H5Pset_virtual_prefix(dapl.get(), "${ORIGIN}");
  }
  Handle dataset(H5Dopen2(file, object.c_str(), dapl.get()), H5Dclose);
  if (dataset) return Result<Handle>(std::move(dataset));
  const std::string refused = take_refused_external();
  if (!refused.empty()) {
    error_detail();
    return dataset_error(
        ErrorCode::unsupported, name, object,
        "its path leads through an external link to " + refused + ", which is not followed",
        kAllowExternalHint);
  }
  return dataset_error(ErrorCode::io, name, object, "cannot open the dataset",
                       "the file may have changed since it was opened, or be corrupt", true);
}

Status sample_case_data(hid_t file, const std::string& name, const CaseInfo& info,
                        const OpenOptions& options, int64_t sample_bytes,
                        const std::function<void(const std::string&)>& on_dataset,
                        const std::set<std::string>* risky) {
  for (const TensorInfo& t : info.tensors) {
    const std::string object = join_path(info.stored_path(), t.dataset);
    if (risky != nullptr && !risky->count(object)) continue;
    if (on_dataset) on_dataset(object);
    Status read = sample_tensor(file, name, info, t, options, sample_bytes);
    if (!read) return read;
  }
  return Ok{};
}

}  // namespace attnscope::h5
