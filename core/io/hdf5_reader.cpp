// DumpReader: opens a schema-1 HDF5 dump read-only, discovers its cases from metadata and loads
// one case's tensors on demand into canonical layout.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/io/hdf5_common.h"

namespace attnscope {

using h5::Handle;

struct DumpReader::State {
  std::string path;
  OpenOptions options;
  Handle file;
  std::vector<CaseInfo> cases;
  std::vector<Error> rejected;

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

Result<Handle> open_file(const std::string& path) {
  if (auto e = check_readable(path)) return *e;
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    h5::error_detail();
    return make_error(ErrorCode::format, path + ": not an HDF5 file (no HDF5 signature)",
                      "attnscope reads HDF5 dumps (schema 1); write one with h5py or the "
                      "attnscope_record hook");
  }
  Handle fapl = h5::plist_handle(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7)
  H5Pset_file_locking(fapl.get(), true, true);
#endif
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!file) {
    const std::string detail = h5::error_detail();
    return make_error(ErrorCode::format,
                      path + ": not a readable HDF5 file (truncated or corrupt)" +
                          (detail.empty() ? "" : " (HDF5: " + detail + ")"),
                      "the file may have been cut short (incomplete copy or a crashed writer); "
                      "re-export or re-copy it");
  }
  return Result<Handle>(std::move(file));
}

Error no_case_error(const std::string& path, const std::vector<Error>& rejected) {
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

// Opens a case's dataset with external files / virtual sources resolved next to the dump.
Handle open_dataset(hid_t file, const std::string& object, const OpenOptions& options) {
  Handle dapl = h5::plist_handle(H5Pcreate(H5P_DATASET_ACCESS));
  if (options.allow_external) {
    H5Pset_efile_prefix(dapl.get(), "${ORIGIN}");
    H5Pset_virtual_prefix(dapl.get(), "${ORIGIN}");
  }
  return Handle(H5Dopen2(file, object.c_str(), dapl.get()), H5Dclose);
}

// Reads one stored tensor (file layout) after re-checking its metadata against discovery.
Result<HostTensor> read_tensor(hid_t file, const std::string& path, const CaseInfo& info,
                               const TensorInfo& t, const OpenOptions& options) {
  const std::string object = h5::join_path(info.path, t.dataset);
  Handle dataset = open_dataset(file, object, options);
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
  auto file = open_file(path);
  if (!file) return file.error();
  auto state = std::make_unique<State>();
  state->path = path;
  state->options = options;
  state->file = std::move(*file);
  h5::Discovery found = h5::discover_cases(state->file.get(), path, options);
  if (found.cases.empty()) return no_case_error(path, found.rejected);
  state->cases = std::move(found.cases);
  state->rejected = std::move(found.rejected);
  return DumpReader(std::move(state));
}

const std::string& DumpReader::path() const {
  return state_->path;
}
const std::vector<CaseInfo>& DumpReader::cases() const {
  return state_->cases;
}
const std::vector<Error>& DumpReader::rejected() const {
  return state_->rejected;
}

Result<CaseData> DumpReader::load(const std::string& case_path) const {
  auto lock = h5::lock_library();
  const std::string wanted = case_path.empty() || case_path[0] != '/' ? "/" + case_path : case_path;
  const CaseInfo* info = nullptr;
  for (const CaseInfo& c : state_->cases) {
    if (c.path == wanted) info = &c;
  }
  if (info == nullptr) {
    return make_error(ErrorCode::not_found, state_->path + ": no case at '" + case_path + "'",
                      "list the cases with `attnscope-cli scan " + state_->path + "`");
  }
  CaseData data;
  data.info = *info;
  for (const TensorInfo& t : info->tensors) {
    auto stored = read_tensor(state_->file.get(), state_->path, *info, t, state_->options);
    if (!stored) return stored.error();
    data.tensors[t.name] = to_canonical(t.name, *stored, info->config.layout);
  }
  return data;
}

}  // namespace attnscope
