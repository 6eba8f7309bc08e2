// ByteStore over a zip archive with libzip (torch.save's stored members, numpy.savez's stored or
// deflated ones): members are listed from the central directory with libzip's consistency
// checks (a member declaring more than deflate's ~1032:1 ratio is a zip bomb and refused), read
// from an offset (seeking in stored members, inflating and dropping what precedes the offset
// in deflated ones, then inflating the rest to check the CRC) and never past their declared
// size. An archive libzip refuses for a duplicate member name is refused naming the name.
#include <zip.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "core/io/byte_store.h"

namespace attnscope {

namespace {

const char* const kCorruptZipHint =
    "the archive is damaged or was cut short; re-save it (torch.save / numpy.savez) or copy it "
    "again";

std::string zip_error_text(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

class ZipStore : public ByteStore {
 public:
  ZipStore(std::string name, zip_t* archive, std::vector<uint8_t> image)
      : name_(std::move(name)), archive_(archive), image_(std::move(image)) {}
  ~ZipStore() override { zip_discard(archive_); }

  // Lists the members; fails on encrypted ones, absurd sizes or too many members.
  Status list() {
    const zip_int64_t count = zip_get_num_entries(archive_, 0);
    if (count < 0 || count > kMaxZipEntries) {
      return make_error(ErrorCode::too_large,
                        name_ + ": a zip archive of " + std::to_string(count) +
                            " members, more than attnscope reads (" +
                            std::to_string(kMaxZipEntries) + ")",
                        "a dump holds a few tensors per case; this archive is not one");
    }
    for (zip_int64_t i = 0; i < count; ++i) {
      zip_stat_t st;
      zip_stat_init(&st);
      if (zip_stat_index(archive_, static_cast<zip_uint64_t>(i), 0, &st) != 0 ||
          !(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE) ||
          !(st.valid & ZIP_STAT_COMP_SIZE)) {
        return store_error(*this, "member " + std::to_string(i), "cannot be listed",
                           kCorruptZipHint);
      }
      if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) {
        return make_error(ErrorCode::unsupported, name_ + ": " + st.name + ": encrypted member",
                          "save the dump without encryption");
      }
      if (st.size > (uint64_t{1} << 62) || st.comp_size > (uint64_t{1} << 62) ||
          (st.comp_method == ZIP_CM_STORE && st.size != st.comp_size)) {
        return store_error(*this, st.name, "declares an impossible size", kCorruptZipHint);
      }
      // Deflate cannot inflate beyond about 1032:1; a member declaring more lies (a zip bomb).
      if (st.size > st.comp_size * kMaxRatio + kPiece) {
        return make_error(ErrorCode::too_large,
                          name_ + ": " + st.name + ": declares " + std::to_string(st.size) +
                              " bytes inflated from " + std::to_string(st.comp_size) +
                              " compressed bytes, more than deflate can produce (a zip bomb)",
                          "the archive is crafted or corrupt; do not open it");
      }
      if (find(st.name) == nullptr) index_.emplace(st.name, static_cast<zip_uint64_t>(i));
      add_entry({st.name, static_cast<int64_t>(st.size), static_cast<int64_t>(st.comp_size),
                 st.comp_method != ZIP_CM_STORE});
    }
    return Ok{};
  }

  const std::string& name() const override { return name_; }

  Result<std::vector<uint8_t>> read_range(const std::string& entry, int64_t offset, int64_t bytes,
                                          bool to_end) const override {
    if (auto e = check_store_range(*this, entry, offset, bytes)) return *e;
    std::vector<uint8_t> out(static_cast<size_t>(bytes));
    std::lock_guard<std::mutex> lock(mutex_);
    zip_file_t* file = open(entry);
    if (file == nullptr) return failure(entry, nullptr);
    const bool compressed = find(entry)->compressed;
    if (offset > 0 && (compressed || zip_fseek(file, offset, SEEK_SET) != 0)) {
      // Deflated members do not seek: inflate up to the offset and drop it.
      std::vector<uint8_t> skip(std::min<int64_t>(offset, kPiece));
      for (int64_t left = offset; left > 0;) {
        const zip_int64_t got = zip_fread(
            file, skip.data(), static_cast<zip_uint64_t>(std::min<int64_t>(left, kPiece)));
        if (got <= 0) return failure(entry, file, got == 0);
        left -= got;
      }
    }
    for (size_t done = 0; done < out.size();) {
      const zip_int64_t got = zip_fread(file, out.data() + done, out.size() - done);
      if (got <= 0) return failure(entry, file, got == 0);
      done += static_cast<size_t>(got);
    }
    if (compressed && to_end) {
      // The rest of a deflated member is inflated and dropped, so that its CRC is checked and
      // a stream inflating past its declared size is caught.
      std::vector<uint8_t> rest(kPiece);
      for (int64_t total = offset + bytes;;) {
        const zip_int64_t got = zip_fread(file, rest.data(), rest.size());
        if (got < 0) return failure(entry, file);
        if (got == 0) break;
        total += got;
        if (total > find(entry)->size) {
          zip_fclose(file);
          return store_error(
              *this, entry,
              "inflates past its declared " + std::to_string(find(entry)->size) + " bytes",
              "the archive is crafted (a zip bomb) or damaged; do not open it");
        }
      }
    }
    zip_fclose(file);
    return out;
  }

 private:
  static constexpr int64_t kPiece = int64_t{1} << 16;
  static constexpr uint64_t kMaxRatio = 1100;

  zip_file_t* open(const std::string& entry) const {
    auto it = index_.find(entry);
    return it == index_.end() ? nullptr : zip_fopen_index(archive_, it->second, 0);
  }

  // The error of a failed open (file null) or read (`short_data`: the data ended before its
  // declared size), closing the member.
  Error failure(const std::string& entry, zip_file_t* file, bool short_data = false) const {
    std::string detail = file != nullptr ? zip_file_strerror(file) : zip_strerror(archive_);
    if (file != nullptr) zip_fclose(file);
    if (short_data) detail = "the data ends before its declared size";
    return store_error(*this, entry, "cannot read the data (" + detail + ")", kCorruptZipHint);
  }

  std::string name_;
  zip_t* archive_;
  std::vector<uint8_t> image_;  // the bytes an in-memory archive reads from
  std::unordered_map<std::string, zip_uint64_t> index_;  // name -> libzip's index
  mutable std::mutex mutex_;
};

Result<std::unique_ptr<ByteStore>> finish(std::unique_ptr<ZipStore> store) {
  Status listed = store->list();
  if (!listed) return listed.error();
  return std::unique_ptr<ByteStore>(std::move(store));
}

uint32_t le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
uint16_t le16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}

// The first member name the central directory holds twice, found by walking it ourselves
// (libzip refuses such an archive with a bare "File already exists"). `read(offset, bytes)`
// gives the archive's bytes; "" when no duplicate is found.
std::string duplicate_member(int64_t size,
                             const std::function<std::vector<uint8_t>(int64_t, int64_t)>& read) {
  // The end-of-central-directory record: 22 bytes plus a comment of up to 65535.
  const int64_t tail_bytes = std::min<int64_t>(size, 22 + 65535);
  const std::vector<uint8_t> tail = read(size - tail_bytes, tail_bytes);
  if (tail.size() < 22) return {};
  size_t at = tail.size() - 22;
  while (at > 0 && le32(&tail[at]) != 0x06054b50) --at;
  if (le32(&tail[at]) != 0x06054b50) return {};
  const int64_t dir_bytes = le32(&tail[at + 12]), dir_offset = le32(&tail[at + 16]);
  if (dir_bytes > (int64_t{64} << 20) || dir_offset + dir_bytes > size) return {};  // zip64
  const std::vector<uint8_t> dir = read(dir_offset, dir_bytes);
  std::unordered_map<std::string, int> seen;
  for (size_t p = 0; p + 46 <= dir.size() && le32(&dir[p]) == 0x02014b50;) {
    const size_t name = le16(&dir[p + 28]), extra = le16(&dir[p + 30]),
                 comment = le16(&dir[p + 32]);
    if (p + 46 + name > dir.size()) break;
    std::string entry(reinterpret_cast<const char*>(&dir[p + 46]), name);
    if (++seen[entry] == 2) return entry;
    p += 46 + name + extra + comment;
  }
  return {};
}

Error open_error(const std::string& name, int code, int64_t size,
                 const std::function<std::vector<uint8_t>(int64_t, int64_t)>& read) {
  if (code == ZIP_ER_EXISTS) {
    const std::string twice = duplicate_member(size, read);
    if (!twice.empty()) {
      return make_error(ErrorCode::format,
                        name + ": two archive members named '" + twice +
                            "' (which one is the tensor is ambiguous)",
                        "re-save the dump so that each member name appears once (numpy.savez / "
                        "torch.save never write duplicates; the archive was edited by hand)");
    }
  }
  return make_error(ErrorCode::format,
                    name + ": not a readable zip archive (" + zip_error_text(code) + ")",
                    kCorruptZipHint);
}

}  // namespace

Result<std::unique_ptr<ByteStore>> open_zip_store(const std::string& path) {
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (archive == nullptr) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    const int64_t size = in ? static_cast<int64_t>(in.tellg()) : 0;
    return open_error(path, code, size, [&](int64_t offset, int64_t bytes) {
      std::vector<uint8_t> out(static_cast<size_t>(bytes));
      in.seekg(offset);
      in.read(reinterpret_cast<char*>(out.data()), bytes);
      out.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
      return out;
    });
  }
  return finish(std::make_unique<ZipStore>(path, archive, std::vector<uint8_t>{}));
}

Result<std::unique_ptr<ByteStore>> open_zip_image(const void* data, size_t size,
                                                  const std::string& name) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  std::vector<uint8_t> image(bytes, bytes + size);
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(image.data(), image.size(), 0, &error);
  zip_t* archive = source == nullptr
                       ? nullptr
                       : zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error);
  if (archive == nullptr) {
    if (source != nullptr) zip_source_free(source);
    const int code = zip_error_code_zip(&error);
    zip_error_fini(&error);
    return open_error(
        name, code, static_cast<int64_t>(image.size()), [&](int64_t offset, int64_t bytes) {
          return std::vector<uint8_t>(image.begin() + offset, image.begin() + offset + bytes);
        });
  }
  zip_error_fini(&error);
  return finish(std::make_unique<ZipStore>(name, archive, std::move(image)));
}

}  // namespace attnscope
