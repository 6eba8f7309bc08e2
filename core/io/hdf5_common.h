// Internal helpers shared by the HDF5 reader and writer: RAII handles, the library lock, error
// text from the HDF5 error stack, element-type mapping, storage / shape safety checks and
// attribute access. Only core/io/*.cpp include this (and hdf5.h).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/case_model.h"
#include "core/io/hdf5_dump.h"
#include "core/result.h"

namespace attnscope::h5 {

// Owns one HDF5 identifier and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), closer_(other.closer_) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, -1);
      closer_ = other.closer_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  explicit operator bool() const { return valid(); }
  void reset() {
    if (id_ >= 0 && closer_ != nullptr) closer_(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

inline Handle type_handle(hid_t id) {
  return Handle(id, H5Tclose);
}
inline Handle space_handle(hid_t id) {
  return Handle(id, H5Sclose);
}
inline Handle plist_handle(hid_t id) {
  return Handle(id, H5Pclose);
}
inline Handle object_handle(hid_t id) {
  return Handle(id, H5Oclose);
}
inline Handle attribute_handle(hid_t id) {
  return Handle(id, H5Aclose);
}

inline constexpr const char* kAllowExternalHint =
    "the data lives outside this file; pass --allow-external (OpenOptions::allow_external) if "
    "you trust the file";

// The HDF5 build is not thread-safe: every public io entry point holds this lock. It also turns
// off HDF5's automatic error printing (errors become Results).
std::unique_lock<std::recursive_mutex> lock_library();

// The innermost description on HDF5's error stack ("truncated file: eof = ..."), then clears it.
std::string error_detail();

// "/a/b" + "q" -> "/a/b/q"; "/" + "q" -> "/q".
std::string join_path(const std::string& group, const std::string& name);

// Runs read(file) on `path` opened read-only (or held open: DumpReader::keep_open), the library
// lock held; the open's error when it cannot be opened.
Status with_file(const std::string& path, const std::function<Status(hid_t)>& read);

// "FILE: /case/q: problem" plus the hint; the detail of the HDF5 error stack is appended when
// `with_detail` is set.
Error dataset_error(ErrorCode code, const std::string& file, const std::string& object,
                    const std::string& problem, const std::string& hint, bool with_detail = false);

// ---- element types (hdf5_types.cpp) ----

// How a dataset's elements are read into a HostTensor.
struct ElementMapping {
  DType dtype = DType::f32;
  Handle memory_type;       // type handed to H5Dread
  size_t memory_size = 0;   // bytes per element in memory_type
  bool to_boolean = false;  // memory elements are integers: store (value != 0) as one byte
  bool is_signed = false;   // integer memory elements: signed
};

// Maps the stored type of dataset `name` (canonical tensor name) to a DType, or explains why it
// cannot be read. `bf16_tag` is the dataset's dtype attribute ("" when absent).
Result<ElementMapping> map_element_type(hid_t file_type, const std::string& name,
                                        const std::string& bf16_tag, const std::string& file,
                                        const std::string& object);

// File type written for `dtype` (float16 as an IEEE half, bool as h5py's enum, ...).
Handle file_type_for(DType dtype, Bf16Storage bf16);
Handle half_type();
Handle bool_enum_type();
Handle utf8_string_type();  // variable-length UTF-8 string, as h5py writes `str`

// ---- safety (hdf5_safety.cpp) ----

// Identity of an object across links (file number + address), for the visited set.
struct ObjectKey {
  unsigned long fileno = 0;
  uint64_t address = 0;
  bool operator<(const ObjectKey& o) const {
    return fileno != o.fileno ? fileno < o.fileno : address < o.address;
  }
};
enum class ObjectKind { group, dataset, other };
struct OpenObject {
  Handle handle;  // open group / dataset / named datatype
  ObjectKey key;  // set for groups only
  ObjectKind kind = ObjectKind::other;
};
// Link access under which the HDF5 library itself refuses to open another file for an external
// link met anywhere on a path (a soft link into an externally linked group included), unless
// options.allow_external: its traversal callback denies the step before the file is opened.
// `dataset`: a dataset access list (which carries the link access properties too).
Handle link_access(const OpenOptions& options, bool dataset = false);
// The external link the library last refused under link_access ("file 'x.h5', object '/y'"),
// then forgets it; "" when none was refused since the last call.
std::string take_refused_external();

// Opens `name` in `group` under `lapl` (following soft links); nullopt for dangling links and
// refused external links. `key` is read for groups only (datasets and named types are never
// traversed).
std::optional<OpenObject> open_object(hid_t group, const char* name, hid_t lapl);

// Refuses virtual datasets, external raw storage (unless allowed) and unavailable filters.
// `risky_read`, when given, says whether reading the data goes beyond a plain byte range of
// the file, where libhdf5 can fault or block: a chunk index and filters, other files.
std::optional<Error> check_storage(hid_t dataset, const OpenOptions& options,
                                   const std::string& file, const std::string& object,
                                   bool* risky_read = nullptr);

// Reads the dataspace extent; refuses null spaces, dims beyond int64 and shapes whose bytes
// overflow 64 bits or exceed options.max_tensor_bytes.
Result<std::vector<int64_t>> read_extent(hid_t dataset, size_t element_size,
                                         const OpenOptions& options, const std::string& file,
                                         const std::string& object);

// ---- attributes (hdf5_attributes.cpp) ----

// Names of the attributes attached to `object`.
std::vector<std::string> attribute_names(hid_t object);
// Reads a scalar (or one-element) attribute as text / number; errors name `where`.
Result<std::string> read_string_attribute(hid_t object, const char* attr, const std::string& where);
Result<double> read_number_attribute(hid_t object, const char* attr, const std::string& where);
// The case group attributes of schema 1; unknown attributes are ignored.
Result<CaseConfig> read_case_config(hid_t group, const std::string& where);

Status write_string_attribute(hid_t object, const char* attr, const std::string& value);
Status write_double_attribute(hid_t object, const char* attr, double value);
Status write_int_attribute(hid_t object, const char* attr, int64_t value);
Status write_bool_attribute(hid_t object, const char* attr, bool value);
Status write_case_config(hid_t group, const CaseConfig& config);

// ---- health statistics (hdf5_health.cpp) ----

// Links in the /health group (the recorder's statistics blocks); 0 without it, or when /health
// is a soft or external link (never followed: neither discovery nor the reader goes there).
int64_t count_health_blocks(hid_t file);

// ---- discovery (hdf5_discovery.cpp) ----

// What a dataset holds, from metadata only.
struct DatasetMeta {
  ElementMapping element;
  std::vector<int64_t> shape;  // as stored
  bool risky_read = false;     // chunked, virtual or external (check_storage)
};
// Storage, element-type and extent checks of one open dataset holding tensor `name`.
Result<DatasetMeta> inspect_dataset(hid_t dataset, const std::string& name,
                                    const OpenOptions& options, const std::string& file,
                                    const std::string& object);

struct Discovery {
  std::vector<CaseInfo> cases;  // sorted with sort_cases
  std::vector<Error> rejected;
  // Object paths ("/case/q") of the cases' datasets whose read is risky (check_storage).
  std::set<std::string> risky_reads;
};
// Walks every group reachable from the root (soft / hard link cycles visited once) and
// validates each group that holds q, k or v; reads no tensor data.
Discovery discover_cases(hid_t file, const std::string& file_name, const OpenOptions& options);

// ---- data sampling (hdf5_sample.cpp) ----

// Opens dataset `object` of dump `name` under link_access, with external files / virtual
// sources resolved next to the dump when they are allowed; an Error naming a refused external
// link or the failed open.
Result<Handle> open_case_dataset(hid_t file, const std::string& name, const std::string& object,
                                 const OpenOptions& options);

// Test reads of the tensors of `info` (see DumpReader::check_data): of those in `risky` when
// given (a contiguous or compact dataset is a plain byte range of the file, whose read fails
// cleanly at load time if it must), else of every one; `on_dataset` is called with the
// dataset's path before its data is read.
Status sample_case_data(hid_t file, const std::string& name, const CaseInfo& info,
                        const OpenOptions& options, int64_t sample_bytes,
                        const std::function<void(const std::string&)>& on_dataset,
                        const std::set<std::string>* risky);

}  // namespace attnscope::h5
