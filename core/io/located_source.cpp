// The DumpSource of .pt / .npz / .safetensors files: a ByteStore (zip members or the plain
// file) plus the TensorLocation of every listed tensor; a read fetches the bytes a tensor's
// elements span and gathers them into file layout.
#include <algorithm>

#include "core/io/dump_format.h"
#include "core/io/dump_source.h"
#include "core/io/located_formats.h"
#include "core/io/mask_values.h"
#include "core/memory_budget.h"

namespace attnscope {

namespace {

const char* const kChangedHint = "the file may have changed since it was opened; reopen it";

class LocatedSource : public DumpSource {
 public:
  LocatedSource(std::unique_ptr<ByteStore> store, std::map<std::string, TensorLocation> where)
      : store_(std::move(store)), where_(std::move(where)) {}

  Result<HostTensor> read_tensor(const CaseInfo& info, const TensorInfo& t) const override {
    auto span = locate(info, t);
    if (!span) return span.error();
    const TensorLocation& at = where_.at(location_key(info.stored_path(), t.dataset));
    // The span read and the dense tensor gathered from it are held at once.
    int64_t dense = static_cast<int64_t>(dtype_size(t.dtype)), need = 0;
    for (int64_t d : t.shape) dense = saturating_product({dense, d});
    if (__builtin_add_overflow(span->bytes, dense, &need)) need = INT64_MAX;
    Status fits = check_memory(
        store_->name() + ": " + location_key(info.stored_path(), t.dataset) + ": reading its data",
        need);
    if (!fits) return fits.error();
    Result<std::vector<uint8_t>> bytes = store_->read(at.entry, span->first, span->bytes);
    if (!bytes) return bytes.error();
    HostTensor out = gather_tensor(t.dtype, t.shape, at, bytes->data());
    if (is_bool_tensor(t.name) && t.dtype == DType::u8) {
      if (auto bad = check_mask_values(
              out.bytes.data(), out.bytes.size(), 1, false, t.shape,
              store_->name() + ": " + location_key(info.stored_path(), t.dataset))) {
        return *bad;
      }
    }
    return out;
  }

  Status check_case(const CaseInfo& info, int64_t sample_bytes,
                    const DatasetCallback& on_dataset) const override {
    for (const TensorInfo& t : info.tensors) {
      if (on_dataset) on_dataset(location_key(info.stored_path(), t.dataset));
      auto span = locate(info, t);
      if (!span) return span.error();
      const std::string& entry = where_.at(location_key(info.stored_path(), t.dataset)).entry;
      const StoreEntry* e = store_->find(entry);
      if (span->bytes <= sample_bytes || e == nullptr || e->compressed) {
        // A deflated member is inflated to its end whatever is read (its CRC is checked).
        const int64_t bytes = std::min(span->bytes, sample_bytes);
        Result<std::vector<uint8_t>> read = store_->read(entry, span->first, bytes);
        if (!read) return read.error();
      } else {
        for (int64_t at : {span->first, span->first + span->bytes - sample_bytes}) {
          Result<std::vector<uint8_t>> part = store_->read(entry, at, sample_bytes);
          if (!part) return part.error();
        }
      }
    }
    return Ok{};
  }

 private:
  // The span of a listed tensor's elements, checked against the store.
  Result<ByteSpan> locate(const CaseInfo& info, const TensorInfo& t) const {
    const std::string key = location_key(info.stored_path(), t.dataset);
    auto it = where_.find(key);
    std::optional<ByteSpan> span;
    if (it != where_.end()) span = element_span(t.shape, it->second, dtype_size(t.dtype));
    if (!span) {
      return make_error(ErrorCode::io, store_->name() + ": " + key + ": no valid location",
                        kChangedHint);
    }
    if (auto e = check_store_range(*store_, it->second.entry, span->first, span->bytes)) return *e;
    return *span;
  }

  std::unique_ptr<ByteStore> store_;
  std::map<std::string, TensorLocation> where_;
};

Result<OpenedSource> discover(Result<std::unique_ptr<ByteStore>> store, bool zip,
                              const OpenOptions& options) {
  if (!store) return store.error();
  const ByteStore& bytes = **store;
  Result<DumpListing> listing = !zip                   ? discover_safetensors(bytes, options)
                                : is_pt_archive(bytes) ? discover_pt(bytes, options)
                                                       : discover_npz(bytes, options);
  if (!listing) return listing.error();
  OpenedSource out;
  out.source = std::make_unique<LocatedSource>(std::move(*store), listing->locations);
  out.listing = std::move(*listing);
  return out;
}

}  // namespace

Result<OpenedSource> open_located_source(const std::string& path, bool zip,
                                         const OpenOptions& options) {
  return discover(zip ? open_zip_store(path) : open_file_store(path), zip, options);
}

Result<OpenedSource> open_located_image_source(const void* data, size_t size,
                                               const std::string& name, bool zip,
                                               const OpenOptions& options) {
  if (!zip) return discover(open_memory_store(data, size, name), zip, options);
  return discover(open_zip_image(data, size, name), zip, options);
}

Result<OpenedSource> listed_located_source(const std::string& path, bool zip, DumpListing listing,
                                           const OpenOptions&) {
  Result<std::unique_ptr<ByteStore>> store = zip ? open_zip_store(path) : open_file_store(path);
  if (!store) return store.error();
  OpenedSource out;
  out.source = std::make_unique<LocatedSource>(std::move(*store), listing.locations);
  out.listing = std::move(listing);
  return out;
}

}  // namespace attnscope
