// DumpWriter: writes cases in schema 1 the way h5py would (float16 as IEEE half, bool as h5py's
// enum, strings as variable-length UTF-8), deterministically (no object timestamps), into a
// hidden temporary that close() fsyncs and renames over the target (AtomicFile).
#include <algorithm>
#include <map>

#include "core/io/atomic_file.h"
#include "core/io/hdf5_common.h"

namespace attnscope {

using h5::Handle;

struct DumpWriter::State {
  std::string path;
  WriteOptions options;
  AtomicFile atomic;  // destroyed after `file`: an unclosed writer's temporary is removed
  Handle file;

  State(std::string p, WriteOptions o, AtomicFile a)
      : path(std::move(p)), options(o), atomic(std::move(a)) {}

  ~State() {
    auto lock = h5::lock_library();
    file.reset();
  }
};

namespace {

constexpr uint64_t kChunkTargetBytes = uint64_t{256} << 10;
constexpr uint64_t kCompressMinBytes = 4096;

Error write_error(const std::string& file, const std::string& object, const std::string& problem) {
  return h5::dataset_error(ErrorCode::io, file, object, problem,
                           "check the disk space and that the directory is writable", true);
}

// Object creation properties without timestamps, so regenerating a file gives identical bytes.
Handle untimed_plist(hid_t plist_class) {
  Handle plist = h5::plist_handle(H5Pcreate(plist_class));
  H5Pset_obj_track_times(plist.get(), false);
  return plist;
}

// Chunk shape: the full shape with leading dims halved until a chunk holds <= 256 KiB.
std::vector<hsize_t> chunk_shape(const std::vector<hsize_t>& dims, size_t element_size) {
  std::vector<hsize_t> chunk = dims;
  auto bytes = [&] {
    uint64_t b = element_size;
    for (hsize_t c : chunk) b *= c;
    return b;
  };
  for (size_t i = 0; i < chunk.size() && bytes() > kChunkTargetBytes; ++i) {
    while (chunk[i] > 1 && bytes() > kChunkTargetBytes) chunk[i] = (chunk[i] + 1) / 2;
  }
  return chunk;
}

// Creates (or opens) `path` and every group above it.
Result<Handle> make_groups(hid_t file, const std::string& file_name, const std::string& path) {
  Handle group = h5::object_handle(H5Oopen(file, "/", H5P_DEFAULT));
  Handle gcpl = untimed_plist(H5P_GROUP_CREATE);
  std::string prefix;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string name = path.substr(start, end - start);
    start = end + 1;
    if (name.empty()) continue;
    prefix += "/" + name;
    if (H5Lexists(group.get(), name.c_str(), H5P_DEFAULT) > 0) {
      group = h5::object_handle(H5Oopen(group.get(), name.c_str(), H5P_DEFAULT));
      if (!group || H5Iget_type(group.get()) != H5I_GROUP) {
        return h5::dataset_error(ErrorCode::invalid_argument, file_name, prefix,
                                 "exists and is not a group", "choose another case path", true);
      }
      continue;
    }
    group = Handle(H5Gcreate2(group.get(), name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                   H5Gclose);
    if (!group) return write_error(file_name, prefix, "cannot create the group");
  }
  return Result<Handle>(std::move(group));
}

Status write_dataset(hid_t group, const std::string& file_name, const std::string& object,
                     const std::string& name, const HostTensor& t, const WriteOptions& options) {
  Handle type = h5::file_type_for(t.dtype, options.bf16);
  const std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
  Handle space = h5::space_handle(
      t.shape.empty() ? H5Screate(H5S_SCALAR)
                      : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle dcpl = untimed_plist(H5P_DATASET_CREATE);
  const bool nonempty = std::all_of(dims.begin(), dims.end(), [](hsize_t d) { return d > 0; });
  if (options.deflate_level > 0 && !dims.empty() && nonempty &&
      t.bytes.size() >= kCompressMinBytes) {
    const std::vector<hsize_t> chunk = chunk_shape(dims, dtype_size(t.dtype));
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    H5Pset_shuffle(dcpl.get());
    H5Pset_deflate(dcpl.get(), static_cast<unsigned>(std::min(options.deflate_level, 9)));
  }
  Handle dataset(H5Dcreate2(group, name.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl.get(),
                            H5P_DEFAULT),
                 H5Dclose);
  if (!dataset) return write_error(file_name, object, "cannot create the dataset");
  std::vector<uint8_t> bytes = t.bytes;
  if (t.dtype == DType::boolean) {
    for (uint8_t& b : bytes) b = b != 0 ? 1 : 0;
  }
  if (!bytes.empty() &&
      H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) < 0) {
    return write_error(file_name, object, "cannot write the data");
  }
  if (t.dtype == DType::bf16 && options.bf16 == Bf16Storage::uint16_with_attribute) {
    return h5::write_string_attribute(dataset.get(), "dtype", "bfloat16");
  }
  return Ok{};
}

// The case's tensors in file layout, checked like a reader would check them; `layout` is set
// to the layout they are stored in.
Result<std::map<std::string, HostTensor>> stored_tensors(const CaseData& data,
                                                         const std::string& where, Layout& layout) {
  std::map<std::string, HostTensor> stored;
  std::vector<TensorInfo> infos;
  for (const auto& [name, t] : data.tensors) {
    const char* canonical = canonical_tensor_name(name);
    if (canonical == nullptr || name != canonical) {
      return make_error(ErrorCode::invalid_argument,
                        where + ": '" + name + "' is not a schema-1 tensor name",
                        "use q, k, v, do, mask, bias, o, lse, dq, dk, dv");
    }
    if (t.bytes.size() != static_cast<size_t>(t.numel()) * dtype_size(t.dtype)) {
      return make_error(ErrorCode::invalid_argument,
                        where + "/" + name + ": byte count does not match shape " +
                            t.shape_string() + " of " + dtype_name(t.dtype));
    }
    HostTensor s = from_canonical(name, t, data.info.config.layout);
    infos.push_back({name, name, s.dtype, s.shape});
    stored.emplace(name, std::move(s));
  }
  auto dims = infer_case_dims(infos, data.info.config.layout, where);
  if (!dims) {
    Error e = dims.error();
    e.code = ErrorCode::invalid_argument;
    return e;
  }
  layout = case_layout(infos, data.info.config.layout);
  return stored;
}

std::string absolute(const std::string& group_path) {
  return group_path.empty() || group_path[0] != '/' ? "/" + group_path : group_path;
}

Error closed_error(const char* call) {
  return make_error(ErrorCode::invalid_argument, std::string(call) + " after close()",
                    "create a new DumpWriter");
}

}  // namespace

DumpWriter::DumpWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
DumpWriter::DumpWriter(DumpWriter&&) noexcept = default;
DumpWriter& DumpWriter::operator=(DumpWriter&&) noexcept = default;
DumpWriter::~DumpWriter() = default;

Result<DumpWriter> DumpWriter::create(const std::string& path, const WriteOptions& options) {
  auto lock = h5::lock_library();
  Result<AtomicFile> atomic = AtomicFile::create(path);
  if (!atomic) return atomic.error();
  Handle fcpl = untimed_plist(H5P_FILE_CREATE);
  Handle fapl = h5::plist_handle(H5Pcreate(H5P_FILE_ACCESS));
#if H5_VERSION_GE(1, 10, 7)
  H5Pset_file_locking(fapl.get(), true, true);
#endif
  Handle file(H5Fcreate(atomic->temp_path().c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()),
              H5Fclose);
  if (!file) {
    return make_error(ErrorCode::io, path + ": cannot create the file: " + h5::error_detail(),
                      "check that the directory exists and is writable");
  }
  Handle root = h5::object_handle(H5Oopen(file.get(), "/", H5P_DEFAULT));
  Status version = h5::write_int_attribute(root.get(), kSchemaVersionAttribute, kSchemaVersion);
  if (version) {
    version = h5::write_int_attribute(root.get(), kSchemaMinorAttribute, kSchemaMinor);
  }
  if (!version) return make_error(ErrorCode::io, path + ": " + version.error().message);
  auto state = std::make_unique<State>(path, options, std::move(*atomic));
  state->file = std::move(file);
  return DumpWriter(std::move(state));
}

Status DumpWriter::write_case(const std::string& group_path, const CaseData& data) {
  auto lock = h5::lock_library();
  if (!state_ || !state_->file) return closed_error("write_case");
  const std::string& file = state_->path;
  const std::string path = absolute(group_path);
  CaseConfig config = data.info.config;
  auto stored = stored_tensors(data, file + ": " + path, config.layout);
  if (!stored) return stored.error();
  auto group = make_groups(state_->file.get(), file, path);
  if (!group) return group.error();
  for (const char* name : kTensorNames) {
    auto it = stored->find(name);
    if (it == stored->end()) continue;
    Status s = write_dataset(group->get(), file, h5::join_path(path, name), name, it->second,
                             state_->options);
    if (!s) return s;
  }
  Status s = h5::write_case_config(group->get(), config);
  if (!s) return make_error(s.error().code, file + ": " + path + ": " + s.error().message);
  return s;
}

Status DumpWriter::write_attributes(
    const std::string& group_path,
    const std::vector<std::pair<std::string, AttributeValue>>& attributes) {
  auto lock = h5::lock_library();
  if (!state_ || !state_->file) return closed_error("write_attributes");
  const std::string path = absolute(group_path);
  Handle group(H5Gopen2(state_->file.get(), path.c_str(), H5P_DEFAULT), H5Gclose);
  if (!group) return write_error(state_->path, path, "no such case group");
  for (const auto& [name, value] : attributes) {
    const Status s =
        std::holds_alternative<std::string>(value)
            ? h5::write_string_attribute(group.get(), name.c_str(), std::get<std::string>(value))
            : h5::write_double_attribute(group.get(), name.c_str(), std::get<double>(value));
    if (!s) return make_error(ErrorCode::io, state_->path + ": " + path + ": " + s.error().message);
  }
  return Ok{};
}

Status DumpWriter::write_extra_dataset(const std::string& group_path, const std::string& name,
                                       const HostTensor& t) {
  auto lock = h5::lock_library();
  if (!state_ || !state_->file) return closed_error("write_extra_dataset");
  const std::string path = absolute(group_path);
  Handle group(H5Gopen2(state_->file.get(), path.c_str(), H5P_DEFAULT), H5Gclose);
  if (!group) return write_error(state_->path, path, "no such case group");
  return write_dataset(group.get(), state_->path, h5::join_path(path, name), name, t,
                       state_->options);
}

const std::string& DumpWriter::temp_path() const {
  return state_->atomic.temp_path();
}

Status DumpWriter::close() {
  auto lock = h5::lock_library();
  if (!state_ || !state_->file) return Ok{};
  const bool flushed = H5Fflush(state_->file.get(), H5F_SCOPE_LOCAL) >= 0;
  const std::string detail = flushed ? "" : h5::error_detail();
  const bool closed = H5Fclose(state_->file.get()) >= 0;
  state_->file = Handle();
  if (!flushed || !closed) {
    state_->atomic.discard();
    return make_error(ErrorCode::io,
                      state_->path + ": cannot flush: " + (closed ? detail : h5::error_detail()),
                      "check the disk space");
  }
  return state_->atomic.commit();
}

}  // namespace attnscope
