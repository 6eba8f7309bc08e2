// DumpReader: opens a schema-1 HDF5 dump read-only, discovers its cases from metadata and loads
// one case's tensors on demand into canonical layout.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/io/hdf5_common.h"
#include "core/memory_budget.h"

namespace attnscope {

using h5::Handle;

struct DumpReader::State {
  std::string path;
  OpenOptions options;
  Handle file;
  std::vector<CaseInfo> cases;
  std::vector<Error> rejected;
  std::vector<BrokenCase> broken;
  int schema_version = 0;
  size_t loads = 0;  // load() calls; guarded by the HDF5 library lock

  ~State() {
    auto lock = h5::lock_library();
    file.reset();
  }
};

namespace {

const char* const kSchemaHint =
    "schema 1: a case is any group holding datasets q, k, v (optional do, mask, bias, o, lse, "
    "dq, dk, dv) with attributes scale, causal, layout, ...; see DESIGN §2";

// Checks the path names a readable regular file before HDF5 sees it.
std::optional<Error> check_readable(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return make_error(ErrorCode::io, path + ": is a directory, not a dump file",
                      "pass the .h5 file inside it");
  }
  std::ifstream probe(path, std::ios::binary);
  if (!probe) {
    return make_error(ErrorCode::io, path + ": cannot open: " + std::strerror(errno),
                      "check the path and its permissions");
  }
  return std::nullopt;
}

Handle file_access(bool file_locking) {
  Handle fapl = h5::plist_handle(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7)
  if (file_locking) H5Pset_file_locking(fapl.get(), true, true);
#endif
  return fapl;
}

Error not_hdf5_error(const std::string& name) {
  return make_error(ErrorCode::format, name + ": not an HDF5 file (no HDF5 signature)",
                    "attnscope reads HDF5 dumps (schema 1); write one with h5py or the "
                    "attnscope_record hook");
}

Result<Handle> finish_open(hid_t id, const std::string& name) {
  Handle file(id, H5Fclose);
  if (!file) {
    const std::string detail = h5::error_detail();
    return make_error(ErrorCode::format,
                      name + ": not a readable HDF5 file (truncated or corrupt)" +
                          (detail.empty() ? "" : " (HDF5: " + detail + ")"),
                      "the file may have been cut short (incomplete copy or a crashed writer); "
                      "re-export or re-copy it");
  }
  return Result<Handle>(std::move(file));
}

Result<Handle> open_file(const std::string& path) {
  if (auto e = check_readable(path)) return *e;
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    h5::error_detail();
    return not_hdf5_error(path);
  }
  Handle fapl = file_access(true);
  return finish_open(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), path);
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
    return not_hdf5_error(name);
  }
  Handle fapl = file_access(false);
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

// Bytes load() holds at its peak: every tensor in canonical layout plus the largest one's raw
// read buffer (saturating; shapes were bounded by discovery).
int64_t load_bytes(const CaseInfo& info) {
  int64_t total = 0, largest = 0;
  for (const TensorInfo& t : info.tensors) {
    int64_t bytes = static_cast<int64_t>(dtype_size(t.dtype));
    for (int64_t d : t.shape) bytes = saturating_product({bytes, d});
    largest = std::max(largest, bytes);
    if (__builtin_add_overflow(total, bytes, &total)) return INT64_MAX;
  }
  return __builtin_add_overflow(total, largest, &total) ? INT64_MAX : total;
}

Error no_case_error(const std::string& path, const std::vector<Error>& rejected,
                    const std::vector<BrokenCase>& broken = {}) {
  if (!broken.empty()) {
    Error first = broken.front().error;
    if (broken.size() > 1) {
      first.message += " (and " + std::to_string(broken.size() - 1) + " more unreadable cases)";
    }
    return first;
  }
  if (rejected.empty()) {
    return make_error(ErrorCode::format, path + ": no case (group with datasets q, k, v) found",
                      kSchemaHint);
  }
  Error first = rejected.front();
  if (rejected.size() > 1) {
    first.message += " (and " + std::to_string(rejected.size() - 1) + " more rejected)";
  }
  return first;
}

// Reads one stored tensor (file layout) after re-checking its metadata against discovery.
Result<HostTensor> read_tensor(hid_t file, const std::string& path, const CaseInfo& info,
                               const TensorInfo& t, const OpenOptions& options) {
  const std::string object = h5::join_path(info.path, t.dataset);
  Handle dataset = h5::open_case_dataset(file, object, options);
  if (!dataset) {
    return h5::dataset_error(ErrorCode::io, path, object, "cannot open the dataset",
                             "the file may have changed since it was opened", true);
  }
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
  if (!meta->element.to_boolean) {
    out.bytes = std::move(raw);
    return out;
  }
  // Integer / enum elements of `size` bytes become one byte holding (value != 0).
  const size_t size = meta->element.memory_size;
  out.bytes.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t b = 0; b < size; ++b) out.bytes[i] |= raw[i * size + b] != 0 ? 1 : 0;
  }
  return out;
}

}  // namespace

DumpReader::DumpReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
DumpReader::DumpReader(DumpReader&&) noexcept = default;
DumpReader& DumpReader::operator=(DumpReader&&) noexcept = default;
DumpReader::~DumpReader() = default;

Result<DumpReader> DumpReader::open(const std::string& path, const OpenOptions& options) {
  auto lock = h5::lock_library();
  return from_file(open_file(path), path, options);
}

Result<DumpReader> DumpReader::open_image(const void* data, size_t size, const std::string& name,
                                          const OpenOptions& options) {
  auto lock = h5::lock_library();
  return from_file(attnscope::open_image(data, size, name), name, options);
}

Result<DumpReader> DumpReader::from_file(Result<h5::Handle> file, const std::string& path,
                                         const OpenOptions& options) {
  if (!file) return file.error();
  auto state = std::make_unique<State>();
  state->path = path;
  state->options = options;
  state->file = std::move(*file);
  state->schema_version = read_schema_version(state->file.get(), path);
  h5::Discovery found = h5::discover_cases(state->file.get(), path, options);
  if (found.cases.empty()) return no_case_error(path, found.rejected);
  state->cases = std::move(found.cases);
  state->rejected = std::move(found.rejected);
  return DumpReader(std::move(state));
}

Result<DumpReader> DumpReader::open_listed(const std::string& path, DumpListing listing,
                                           const OpenOptions& options) {
  auto lock = h5::lock_library();
  Result<Handle> file = open_file(path);
  if (!file) return file.error();
  if (listing.cases.empty()) return no_case_error(path, listing.rejected, listing.broken);
  auto state = std::make_unique<State>();
  state->path = path;
  state->options = options;
  state->file = std::move(*file);
  state->schema_version = listing.schema_version;
  state->cases = std::move(listing.cases);
  state->rejected = std::move(listing.rejected);
  state->broken = std::move(listing.broken);
  return DumpReader(std::move(state));
}

const std::string& DumpReader::path() const {
  return state_->path;
}
int DumpReader::schema_version() const {
  return state_->schema_version;
}
const std::vector<CaseInfo>& DumpReader::cases() const {
  return state_->cases;
}
const std::vector<Error>& DumpReader::rejected() const {
  return state_->rejected;
}
const std::vector<BrokenCase>& DumpReader::broken() const {
  return state_->broken;
}
DumpListing DumpReader::listing() const {
  return {state_->schema_version, state_->cases, state_->rejected, state_->broken};
}

Status DumpReader::check_data(int64_t sample_bytes,
                              const std::function<void(const std::string&)>& on_dataset) const {
  for (const CaseInfo& info : state_->cases) {
    Status read = check_case(info, sample_bytes, on_dataset);
    if (!read) return read;
  }
  return Ok{};
}

Status DumpReader::check_case(const CaseInfo& info, int64_t sample_bytes,
                              const std::function<void(const std::string&)>& on_dataset) const {
  auto lock = h5::lock_library();
  return h5::sample_case_data(state_->file.get(), state_->path, info, state_->options, sample_bytes,
                              on_dataset);
}

size_t DumpReader::loads() const {
  auto lock = h5::lock_library();
  return state_->loads;
}

Result<CaseData> DumpReader::load(const std::string& case_path) const {
  auto lock = h5::lock_library();
  ++state_->loads;
  const std::string wanted = case_path.empty() || case_path[0] != '/' ? "/" + case_path : case_path;
  const CaseInfo* info = nullptr;
  for (const CaseInfo& c : state_->cases) {
    if (c.path == wanted) info = &c;
  }
  for (const BrokenCase& b : state_->broken) {
    if (b.info.path == wanted) return b.error;
  }
  if (info == nullptr) {
    return make_error(ErrorCode::not_found, state_->path + ": no case at '" + case_path + "'",
                      "list the cases with `attnscope-cli scan " + state_->path + "`");
  }
  Status fits =
      check_memory(state_->path + ": " + info->path + ": loading its tensors", load_bytes(*info));
  if (!fits) return fits.error();
  CaseData data;
  data.info = *info;
  for (const TensorInfo& t : info->tensors) {
    auto stored = read_tensor(state_->file.get(), state_->path, *info, t, state_->options);
    if (!stored) return stored.error();
    data.tensors[t.name] = to_canonical(t.name, *stored, info->config.layout, info->dims);
  }
  return data;
}

}  // namespace attnscope
