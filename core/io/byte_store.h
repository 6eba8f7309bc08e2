// Read-only access to the bytes of a dump that is not HDF5: the members of a zip archive
// (.pt, .npz; libzip, deflate included) or a plain file (.safetensors), from disk or from an
// in-memory image. Every read is bounds-checked against the entry's size before anything is
// allocated; reads are serialised, so one store may be shared by threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace attnscope {

struct StoreEntry {
  std::string name;             // zip member name; "" for a plain file
  int64_t size = 0;             // bytes once read (a zip member's declared uncompressed size)
  int64_t compressed_size = 0;  // bytes in the file
  bool compressed = false;      // deflated (a read from an offset inflates what precedes it)
};

class ByteStore {
 public:
  virtual ~ByteStore() = default;

  // The file, as messages name it.
  virtual const std::string& name() const = 0;
  // Zip members in archive order; a plain file is one entry named "".
  const std::vector<StoreEntry>& entries() const { return entries_; }
  // The entry named `entry` (the first of that name), nullptr when absent.
  const StoreEntry* find(const std::string& entry) const;

  // `bytes` bytes of `entry` from `offset`. Fails (format, naming the file and the entry) when
  // the range lies outside the entry or the data cannot be read (truncated, bad deflate data).
  // A deflated zip member is inflated to its end (in small pieces, dropped) so that its CRC is
  // checked and a stream inflating past its declared size fails.
  Result<std::vector<uint8_t>> read(const std::string& entry, int64_t offset, int64_t bytes) const {
    return read_range(entry, offset, bytes, true);
  }
  // The first `bytes` bytes of `entry` without inflating the rest of a deflated member (no CRC
  // check): for headers.
  Result<std::vector<uint8_t>> read_prefix(const std::string& entry, int64_t bytes) const {
    return read_range(entry, 0, bytes, false);
  }

 protected:
  // read() (`to_end`) or read_prefix().
  virtual Result<std::vector<uint8_t>> read_range(const std::string& entry, int64_t offset,
                                                  int64_t bytes, bool to_end) const = 0;
  // Appends an entry (implementations list theirs once, before any read).
  void add_entry(StoreEntry entry);

 private:
  std::vector<StoreEntry> entries_;
  std::unordered_map<std::string, size_t> index_;  // name -> first entry of that name
};

// A plain file opened read-only (the path must name a readable regular file).
Result<std::unique_ptr<ByteStore>> open_file_store(const std::string& path);
// A copy of `size` bytes at `data`, named `name` in messages.
std::unique_ptr<ByteStore> open_memory_store(const void* data, size_t size,
                                             const std::string& name);
// A zip archive on disk / in memory (copied), opened read-only with libzip's consistency
// checks; encrypted members and more than kMaxZipEntries members are refused.
Result<std::unique_ptr<ByteStore>> open_zip_store(const std::string& path);
Result<std::unique_ptr<ByteStore>> open_zip_image(const void* data, size_t size,
                                                  const std::string& name);

inline constexpr int64_t kMaxZipEntries = int64_t{1} << 20;

// "FILE: ENTRY: problem" (or "FILE: problem" for a plain file) with a hint.
Error store_error(const ByteStore& store, const std::string& entry, const std::string& problem,
                  const std::string& hint);
// An error unless `entry` exists and [offset, offset + bytes) lies inside it.
std::optional<Error> check_store_range(const ByteStore& store, const std::string& entry,
                                       int64_t offset, int64_t bytes);

inline constexpr const char* kTruncatedStoreHint =
    "the file may have been cut short (an incomplete download or copy); copy it again";

}  // namespace attnscope
