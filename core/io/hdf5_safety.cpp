// Safety checks before any tensor data is touched: external links refused inside the library,
// object identity for cycle-free traversal,
// refusal of virtual datasets / external raw storage / unavailable filters, and dataspace
// validation (no null spaces, no 64-bit overflow, bounded bytes) before allocation.
#include <cstring>
#include <limits>

#include "core/io/hdf5_common.h"

namespace attnscope::h5 {

namespace {

// What refuse_external last denied; every HDF5 call holds the library lock.
std::string refused_external;

// HDF5's external-link traversal callback: called before the target file is opened, whatever
// path led to the link; a negative return makes the traversal (and the open) fail.
herr_t refuse_external(const char*, const char*, const char* child_file, const char* child_object,
                       unsigned*, hid_t, void*) {
  refused_external = std::string("file '") + (child_file ? child_file : "?") + "', object '" +
                     (child_object ? child_object : "?") + "'";
  return -1;
}

std::string dims_text(const std::vector<hsize_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace

Handle link_access(const OpenOptions& options, bool dataset) {
  Handle plist = plist_handle(H5Pcreate(dataset ? H5P_DATASET_ACCESS : H5P_LINK_ACCESS));
  if (!options.allow_external) H5Pset_elink_cb(plist.get(), refuse_external, nullptr);
  return plist;
}

std::string take_refused_external() {
  return std::exchange(refused_external, std::string());
}

std::optional<OpenObject> open_object(hid_t group, const char* name, hid_t lapl) {
  OpenObject out;
  out.handle = object_handle(H5Oopen(group, name, lapl));
  if (!out.handle) {
    error_detail();
    return std::nullopt;
  }
  // The identifier's type gives the kind at no cost; only groups need their address (the
  // visited set), which costs an object-header read.
  const H5I_type_t type = H5Iget_type(out.handle.get());
  out.kind = type == H5I_GROUP     ? ObjectKind::group
             : type == H5I_DATASET ? ObjectKind::dataset
                                   : ObjectKind::other;
  if (out.kind != ObjectKind::group) return out;
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info;
  if (H5Oget_info3(out.handle.get(), &info, H5O_INFO_BASIC) < 0) {
    error_detail();
    return std::nullopt;
  }
  static_assert(sizeof(info.token) >= sizeof(uint64_t));
  std::memcpy(&out.key.address, &info.token, sizeof(uint64_t));
#else
  H5O_info_t info;
  if (H5Oget_info2(out.handle.get(), &info, H5O_INFO_BASIC) < 0) {
    error_detail();
    return std::nullopt;
  }
  out.key.address = info.addr;
#endif
  out.key.fileno = info.fileno;
  return out;
}

std::optional<Error> check_storage(hid_t dataset, const OpenOptions& options,
                                   const std::string& file, const std::string& object,
                                   bool* risky_read) {
  Handle dcpl = plist_handle(H5Dget_create_plist(dataset));
  if (!dcpl) {
    return dataset_error(ErrorCode::format, file, object, "cannot read the storage properties",
                         "the file may be corrupt", true);
  }
  const H5D_layout_t stored = H5Pget_layout(dcpl.get());
  const int external = H5Pget_external_count(dcpl.get());
  if (risky_read != nullptr) {
    *risky_read = stored == H5D_CHUNKED || stored == H5D_VIRTUAL || external > 0;
  }
  if (!options.allow_external && stored == H5D_VIRTUAL) {
    return dataset_error(ErrorCode::unsupported, file, object,
                         "virtual dataset (its data is mapped from other datasets or files)",
                         kAllowExternalHint);
  }
  if (!options.allow_external && external > 0) {
    char name[256] = {0};
    off_t offset = 0;
    hsize_t size = 0;
    H5Pget_external(dcpl.get(), 0, sizeof name - 1, name, &offset, &size);
    return dataset_error(ErrorCode::unsupported, file, object,
                         "external raw storage (data kept in '" + std::string(name) + "')",
                         kAllowExternalHint);
  }
  const int filters = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, config = 0;
    size_t nvalues = 0;
    char name[128] = {0};
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues,
                                           nullptr, sizeof name - 1, name, &config);
    if (id < 0 || H5Zfilter_avail(id) > 0) continue;
    error_detail();
    return dataset_error(ErrorCode::unsupported, file, object,
                         "compression filter '" + std::string(name) + "' (id " +
                             std::to_string(id) + ") is not available in this HDF5 build",
                         "re-export with compression=\"gzip\" or none, or install the filter "
                         "plugin (HDF5_PLUGIN_PATH)");
  }
  return std::nullopt;
}

Result<std::vector<int64_t>> read_extent(hid_t dataset, size_t element_size,
                                         const OpenOptions& options, const std::string& file,
                                         const std::string& object) {
  Handle space = space_handle(H5Dget_space(dataset));
  if (!space) {
    return dataset_error(ErrorCode::format, file, object, "cannot read the dataspace",
                         "the file may be corrupt", true);
  }
  const H5S_class_t cls = H5Sget_simple_extent_type(space.get());
  if (cls == H5S_NULL) {
    return dataset_error(ErrorCode::format, file, object, "null dataspace (holds no data)",
                         "write the tensor with a shape");
  }
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if ((cls != H5S_SCALAR && cls != H5S_SIMPLE) || rank < 0 || rank > H5S_MAX_RANK) {
    return dataset_error(ErrorCode::format, file, object, "unreadable dataspace rank",
                         "the file may be corrupt", true);
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  std::vector<int64_t> shape;
  uint64_t bytes = element_size;
  bool overflow = false;
  for (hsize_t d : dims) {
    overflow = overflow || d > static_cast<hsize_t>(std::numeric_limits<int64_t>::max()) ||
               __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
    shape.push_back(static_cast<int64_t>(d));
  }
  if (overflow) {
    return dataset_error(ErrorCode::too_large, file, object,
                         "shape " + dims_text(dims) + " has more bytes than 64 bits can count",
                         "the file declares an impossible size; it is corrupt or not a dump");
  }
  if (bytes > static_cast<uint64_t>(options.max_tensor_bytes)) {
    return dataset_error(ErrorCode::too_large, file, object,
                         "shape " + dims_text(dims) + " needs " + std::to_string(bytes) +
                             " bytes, more than the limit of " +
                             std::to_string(options.max_tensor_bytes),
                         "no dump attnscope can analyse holds a tensor this large; the file is "
                         "probably corrupt (programs can raise OpenOptions::max_tensor_bytes)");
  }
  return shape;
}

}  // namespace attnscope::h5
