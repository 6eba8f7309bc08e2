// ByteStore over a plain file (pread on a read-only descriptor) or an in-memory copy.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/io/byte_store.h"

namespace attnscope {

const StoreEntry* ByteStore::find(const std::string& entry) const {
  auto it = index_.find(entry);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void ByteStore::add_entry(StoreEntry entry) {
  index_.emplace(entry.name, entries_.size());
  entries_.push_back(std::move(entry));
}

Error store_error(const ByteStore& store, const std::string& entry, const std::string& problem,
                  const std::string& hint) {
  return make_error(ErrorCode::format,
                    store.name() + ": " + (entry.empty() ? "" : entry + ": ") + problem, hint);
}

std::optional<Error> check_store_range(const ByteStore& store, const std::string& entry,
                                       int64_t offset, int64_t bytes) {
  const StoreEntry* e = store.find(entry);
  if (e == nullptr) {
    return store_error(store, entry, "no such entry", "the file may have changed; reopen it");
  }
  int64_t end = 0;
  if (offset < 0 || bytes < 0 || __builtin_add_overflow(offset, bytes, &end) || end > e->size) {
    return store_error(store, entry,
                       "bytes " + std::to_string(offset) + " to " + std::to_string(end) +
                           " lie beyond its " + std::to_string(e->size) + " bytes",
                       kTruncatedStoreHint);
  }
  return std::nullopt;
}

namespace {

class FileStore : public ByteStore {
 public:
  FileStore(std::string name, int fd, int64_t size) : name_(std::move(name)), fd_(fd) {
    add_entry({"", size, size, false});
  }
  FileStore(std::string name, std::vector<uint8_t> image) : name_(std::move(name)) {
    const int64_t size = static_cast<int64_t>(image.size());
    image_ = std::move(image);
    add_entry({"", size, size, false});
  }
  ~FileStore() override {
    if (fd_ >= 0) ::close(fd_);
  }

  const std::string& name() const override { return name_; }

  Result<std::vector<uint8_t>> read_range(const std::string& entry, int64_t offset, int64_t bytes,
                                          bool) const override {
    if (auto e = check_store_range(*this, entry, offset, bytes)) return *e;
    std::vector<uint8_t> out(static_cast<size_t>(bytes));
    if (fd_ < 0) {
      if (bytes > 0) std::memcpy(out.data(), image_.data() + offset, out.size());
      return out;
    }
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t got = ::pread(fd_, out.data() + done, out.size() - done,
                                  static_cast<off_t>(offset + static_cast<int64_t>(done)));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        return store_error(*this, entry,
                           got == 0 ? "ends before byte " + std::to_string(offset + bytes)
                                    : std::string("cannot read: ") + std::strerror(errno),
                           kTruncatedStoreHint);
      }
      done += static_cast<size_t>(got);
    }
    return out;
  }

 private:
  std::string name_;
  int fd_ = -1;
  std::vector<uint8_t> image_;
};

}  // namespace

Result<std::unique_ptr<ByteStore>> open_file_store(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorCode::io, path + ": cannot open: " + std::strerror(errno),
                      "check the path and its permissions");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::io, path + ": not a regular file",
                      "pass the dump file itself, not a directory or a device");
  }
  return std::unique_ptr<ByteStore>(
      std::make_unique<FileStore>(path, fd, static_cast<int64_t>(st.st_size)));
}

std::unique_ptr<ByteStore> open_memory_store(const void* data, size_t size,
                                             const std::string& name) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  return std::make_unique<FileStore>(name, std::vector<uint8_t>(bytes, bytes + size));
}

}  // namespace attnscope
