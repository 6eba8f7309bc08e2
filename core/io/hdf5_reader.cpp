// The HDF5 DumpSource: opens a schema-1 HDF5 dump read-only (a file, an image, or a file whose
// listing the probe discovered), discovers its cases from metadata and reads one dataset of a
// case on demand. Every HDF5 call holds the library lock.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <sys/stat.h>

#include "core/io/dump_format.h"
#include "core/io/dump_source.h"
#include "core/io/hdf5_common.h"
#include "core/io/input_path.h"
#include "core/io/live_writer.h"
#include "core/io/mask_values.h"

namespace attnscope {

using h5::Handle;

namespace {

// Checks the path names a readable regular file before HDF5 sees it.
std::optional<Error> check_readable(const std::string& path) {
  if (Status file = check_dump_file(path); !file) return file.error();
  std::ifstream probe(path, std::ios::binary);
  if (!probe) {
    return make_error(ErrorCode::io, path + ": cannot open: " + std::strerror(errno),
                      "check the path and its permissions");
  }
  return std::nullopt;
}

// Read access without HDF5's file locks: a viewer holding a dump open must never stop a
// training run from recording into it (issue 21); a failed read names the live writer instead.
Handle file_access() {
  Handle fapl = h5::plist_handle(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7)
  H5Pset_file_locking(fapl.get(), false, true);
#endif
  return fapl;
}

// The first bytes of the file for unknown_format_error.
Error not_hdf5_error(const std::string& path) {
  uint8_t head[16] = {0};
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(head), sizeof head);
  return unknown_format_error(path, head,
                              static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
}

Result<Handle> finish_open(hid_t id, const std::string& name) {
  Handle file(id, H5Fclose);
  if (!file) {
    const std::string detail = h5::error_detail();
    Error e = make_error(ErrorCode::format,
                         name + ": not a readable HDF5 file (truncated or corrupt)" +
                             (detail.empty() ? "" : " (HDF5: " + detail + ")"),
                         "the file may have been cut short (incomplete copy or a crashed "
                         "writer); re-export or re-copy it");
    if (auto live = live_writer_note(name)) {
      e.message = name + ": not readable at this instant" + live->message +
                  (detail.empty() ? "" : " (HDF5: " + detail + ")");
      e.hint = live->hint;
    }
    return e;
  }
  return Result<Handle>(std::move(file));
}

// What says a file on disk changed: its identity, size and change times.
struct FileStamp {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  int64_t modified_ns = 0, changed_ns = 0;
  bool operator==(const FileStamp& o) const {
    return device == o.device && inode == o.inode && size == o.size &&
           modified_ns == o.modified_ns && changed_ns == o.changed_ns;
  }
};

std::optional<FileStamp> stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileStamp{st.st_dev, st.st_ino, st.st_size,
                   int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
                   int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec};
}

// A file opened for one read (the library lock held): borrowed from OpenFiles while its path is
// held open, else owned and closed when the read ends.
struct FileForRead {
  hid_t id = -1;
  Handle owned;
};

// The HDF5 files kept open between reads while a reader holds them (DumpReader::keep_open: a
// scan of the 100k cases of a file opens it once, where each open costs O(cases), its root
// group's name heap being read whole). Without a hold every read opens the file and closes it
// after, so the process may even write it in between (issue 21). A held file whose stamp
// changed (a training run appended a step) is closed before it is opened anew: HDF5 shares one
// open file's cached metadata with every later open of the same file in the process, so no
// stale handle may stay open. Guarded by the library lock.
class OpenFiles {
 public:
  static OpenFiles& instance() {
    static auto* files = new OpenFiles;  // never destroyed: HDF5 closes what is open at exit
    return *files;
  }

  Result<FileForRead> get(const std::string& path) {
    if (auto e = check_readable(path)) return *e;
    const std::optional<FileStamp> stamp = stamp_of(path);
    auto held = held_.find(path);
    if (held != held_.end() && held->second.file && stamp && held->second.stamp == *stamp) {
      return FileForRead{held->second.file.get(), Handle()};
    }
    if (held != held_.end()) held->second.file.reset();  // stale: closed before the new open
    if (H5Fis_hdf5(path.c_str()) <= 0) {
      h5::error_detail();
      return not_hdf5_error(path);
    }
    Handle fapl = file_access();
    Result<Handle> file = finish_open(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), path);
    if (!file) return file.error();
    if (held == held_.end()) {
      const hid_t id = file->get();
      return FileForRead{id, std::move(*file)};
    }
    held->second.stamp = stamp.value_or(FileStamp{});
    held->second.file = std::move(*file);
    return FileForRead{held->second.file.get(), Handle()};
  }

  void hold(const std::string& path) { ++held_[path].holds; }
  void release(const std::string& path) {
    auto it = held_.find(path);
    if (it != held_.end() && --it->second.holds == 0) held_.erase(it);
  }

 private:
  struct Held {
    int holds = 0;
    FileStamp stamp;
    Handle file;  // open once a read needed it
  };
  std::map<std::string, Held> held_;
};

Result<FileForRead> open_file(const std::string& path) {
  return OpenFiles::instance().get(path);
}

// The HDF5 signature sits at offset 0, 512, 1024, 2048, ... (after a user block).
bool image_has_signature(const uint8_t* data, size_t size) {
  static const uint8_t kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  for (size_t at = 0; at + 8 <= size; at = at == 0 ? 512 : at * 2) {
    if (std::memcmp(data + at, kSignature, 8) == 0) return true;
  }
  return false;
}

Result<Handle> open_image(const void* data, size_t size, const std::string& name) {
  if (data == nullptr || !image_has_signature(static_cast<const uint8_t*>(data), size)) {
    return unknown_format_error(name, static_cast<const uint8_t*>(data),
                                std::min<size_t>(size, 16));
  }
  Handle fapl = file_access();
  H5Pset_fapl_core(fapl.get(), 64 << 10, false);
  if (H5Pset_file_image(fapl.get(), const_cast<void*>(data), size) < 0) {
    return make_error(ErrorCode::io, name + ": cannot copy the file image: " + h5::error_detail(),
                      "the image may be too large for the memory available");
  }
  return finish_open(H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get()), name);
}

// kSchemaVersionAttribute of the root group; 0 when absent or not a small non-negative integer.
int read_schema_version(hid_t file, const std::string& name) {
  Handle root = h5::object_handle(H5Oopen(file, "/", H5P_DEFAULT));
  if (!root || H5Aexists(root.get(), kSchemaVersionAttribute) <= 0) {
    h5::error_detail();
    return 0;
  }
  auto version = h5::read_number_attribute(root.get(), kSchemaVersionAttribute, name + ": /");
  h5::error_detail();
  if (!version || !(*version >= 0 && *version <= 1e6)) return 0;
  return static_cast<int>(*version);
}

// The root attributes naming the rank that wrote the dump (attnscope_record under
// torch.distributed); an absent or implausible attribute stays -1 / "".
RankIdentity read_rank_identity(hid_t file, const std::string& name) {
  RankIdentity out;
  Handle root = h5::object_handle(H5Oopen(file, "/", H5P_DEFAULT));
  if (!root) {
    h5::error_detail();
    return out;
  }
  const std::string where = name + ": /";
  const auto number = [&](const char* attr, int64_t& into) {
    if (H5Aexists(root.get(), attr) <= 0) return;
    const auto v = h5::read_number_attribute(root.get(), attr, where);
    if (v && *v >= 0 && *v <= 1e7 && *v == static_cast<double>(static_cast<int64_t>(*v))) {
      into = static_cast<int64_t>(*v);
    }
  };
  number("rank", out.rank);
  number("world_size", out.world_size);
  number("local_rank", out.local_rank);
  if (H5Aexists(root.get(), "host") > 0) {
    const auto host = h5::read_string_attribute(root.get(), "host", where);
    if (host && host->size() <= 255) out.host = *host;
  }
  h5::error_detail();  // clears what a failed read left on the error stack
  return out;
}

// Reads one stored tensor (file layout) after re-checking its metadata against discovery.
Result<HostTensor> read_tensor(hid_t file, const std::string& path, const CaseInfo& info,
                               const TensorInfo& t, const OpenOptions& options) {
  const std::string object = h5::join_path(info.stored_path(), t.dataset);
  Result<Handle> opened = h5::open_case_dataset(file, path, object, options);
  if (!opened) return opened.error();
  const Handle& dataset = *opened;
  auto meta = h5::inspect_dataset(dataset.get(), t.name, options, path, object);
  if (!meta) return meta.error();
  if (meta->shape != t.shape || meta->element.dtype != t.dtype) {
    return h5::dataset_error(ErrorCode::io, path, object, "changed since the file was opened",
                             "reopen the file");
  }
  HostTensor out;
  out.dtype = t.dtype;
  out.shape = t.shape;
  const size_t n = static_cast<size_t>(out.numel());
  std::vector<uint8_t> raw(n * meta->element.memory_size);
  if (n > 0 && H5Dread(dataset.get(), meta->element.memory_type.get(), H5S_ALL, H5S_ALL,
                       H5P_DEFAULT, raw.data()) < 0) {
    return h5::dataset_error(ErrorCode::format, path, object, "cannot read the data",
                             "the file may be truncated or corrupt; re-export it", true);
  }
  const size_t size = meta->element.memory_size;
  if (is_bool_tensor(t.name) && (meta->element.to_boolean || t.dtype == DType::u8)) {
    if (auto bad = check_mask_values(raw.data(), n, size, meta->element.is_signed, t.shape,
                                     path + ": " + object)) {
      return *bad;
    }
  }
  if (!meta->element.to_boolean) {
    out.bytes = std::move(raw);
    return out;
  }
  // Integer / enum elements of `size` bytes (0 or 1) become one byte.
  out.bytes.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t b = 0; b < size; ++b) out.bytes[i] |= raw[i * size + b] != 0 ? 1 : 0;
  }
  return out;
}

// A file on disk is opened through OpenFiles for each read: closed after it unless a reader holds
// it open (keep_open), and opened anew once a training run appended to it (issue 21). Reads are
// serialised by the library lock, so each sees the file as it is. An image keeps its one handle.
class Hdf5Source : public DumpSource {
 public:
  // `image`: the handle of an in-memory image, kept; null for a file on disk (`path`).
  // `risky_reads`: the datasets discovery found whose read may fault or block (the only ones
  // check_case test-reads); nullopt for an adopted listing (every dataset is test-read).
  Hdf5Source(Handle image, std::string path, const OpenOptions& options,
             std::optional<std::set<std::string>> risky_reads)
      : image_(std::move(image)),
        path_(std::move(path)),
        options_(options),
        risky_reads_(std::move(risky_reads)) {}
  ~Hdf5Source() override {
    auto lock = h5::lock_library();
    image_.reset();
  }

  Result<HostTensor> read_tensor(const CaseInfo& info, const TensorInfo& t) const override {
    auto lock = h5::lock_library();
    Result<FileForRead> file = current();
    if (!file) return file.error();
    return attnscope::read_tensor(file->id, path_, info, t, options_);
  }

  Result<std::vector<HostTensor>> read_tensors(const CaseInfo& info) const override {
    auto lock = h5::lock_library();
    Result<FileForRead> file = current();
    if (!file) return file.error();
    std::vector<HostTensor> out;
    for (const TensorInfo& t : info.tensors) {
      Result<HostTensor> one = attnscope::read_tensor(file->id, path_, info, t, options_);
      if (!one) return one.error();
      out.push_back(std::move(*one));
    }
    return out;
  }

  Status check_case(const CaseInfo& info, int64_t sample_bytes,
                    const DatasetCallback& on_dataset) const override {
    auto lock = h5::lock_library();
    Result<FileForRead> file = current();
    if (!file) return file.error();
    return h5::sample_case_data(file->id, path_, info, options_, sample_bytes, on_dataset,
                                risky_reads_ ? &*risky_reads_ : nullptr);
  }

  std::shared_ptr<void> keep_open() const override {
    if (image_) return nullptr;
    auto lock = h5::lock_library();
    OpenFiles::instance().hold(path_);
    return std::shared_ptr<void>(nullptr, [path = path_](void*) {
      auto lock = h5::lock_library();
      OpenFiles::instance().release(path);
    });
  }

 private:
  // The image's handle, or the file as it is on disk now (for one read, the lock held).
  Result<FileForRead> current() const {
    if (image_) return FileForRead{image_.get(), Handle()};
    return open_file(path_);
  }

  Handle image_;
  std::string path_;
  OpenOptions options_;
  std::optional<std::set<std::string>> risky_reads_;
};

// Discovery on an open file (the library lock held); `image` is the handle of an in-memory
// image (the source keeps it), null for a file on disk.
Result<OpenedSource> discover(hid_t file, Handle image, const std::string& path,
                              const OpenOptions& options) {
  OpenedSource out;
  out.listing.format = dump_format_name(DumpFormat::hdf5);
  out.listing.schema_version = read_schema_version(file, path);
  out.listing.rank = read_rank_identity(file, path);
  out.listing.health_blocks = h5::count_health_blocks(file);
  h5::Discovery found = h5::discover_cases(file, path, options);
  out.listing.cases = std::move(found.cases);
  out.listing.rejected = std::move(found.rejected);
  out.source =
      std::make_unique<Hdf5Source>(std::move(image), path, options, std::move(found.risky_reads));
  return out;
}

}  // namespace

namespace h5 {

Status with_file(const std::string& path, const std::function<Status(hid_t)>& read) {
  auto lock = lock_library();
  Result<FileForRead> file = open_file(path);
  if (!file) return file.error();
  return read(file->id);
}

}  // namespace h5

Result<OpenedSource> open_hdf5_source(const std::string& path, const OpenOptions& options) {
  auto lock = h5::lock_library();
  Result<FileForRead> file = open_file(path);
  if (!file) return file.error();
  return discover(file->id, Handle(), path, options);
}

Result<OpenedSource> open_hdf5_image_source(const void* data, size_t size, const std::string& name,
                                            const OpenOptions& options) {
  auto lock = h5::lock_library();
  Result<Handle> image = attnscope::open_image(data, size, name);
  if (!image) return image.error();
  const hid_t file = image->get();
  return discover(file, std::move(*image), name, options);
}

Result<OpenedSource> listed_hdf5_source(const std::string& path, DumpListing listing,
                                        const OpenOptions& options) {
  auto lock = h5::lock_library();
  Result<FileForRead> file = open_file(path);  // readable now
  if (!file) return file.error();
  OpenedSource out;
  out.listing = std::move(listing);
  out.source = std::make_unique<Hdf5Source>(Handle(), path, options, std::nullopt);
  return out;
}

}  // namespace attnscope
