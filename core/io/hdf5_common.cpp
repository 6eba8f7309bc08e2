// Shared HDF5 plumbing: the library lock, error-stack text, object paths and the library's
// version.
#include "core/io/hdf5_common.h"

#include "core/io/hdf5_dump.h"

namespace attnscope::h5 {

std::unique_lock<std::recursive_mutex> lock_library() {
  static std::recursive_mutex mutex;
  std::unique_lock<std::recursive_mutex> lock(mutex);
  H5open();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return lock;
}

namespace {

// Keeps the innermost entry (the first one walking upwards from the failure).
herr_t keep_innermost(unsigned n, const H5E_error2_t* entry, void* out) {
  if (n == 0 && entry->desc != nullptr) *static_cast<std::string*>(out) = entry->desc;
  return 0;
}

}  // namespace

std::string error_detail() {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  return detail;
}

std::string join_path(const std::string& group, const std::string& name) {
  if (group.empty() || group.back() == '/') return group + name;
  return group + "/" + name;
}

Error dataset_error(ErrorCode code, const std::string& file, const std::string& object,
                    const std::string& problem, const std::string& hint, bool with_detail) {
  std::string message = file + ": " + object + ": " + problem;
  if (with_detail) {
    const std::string detail = error_detail();
    if (!detail.empty()) message += " (HDF5: " + detail + ")";
  }
  return make_error(code, std::move(message), hint);
}

}  // namespace attnscope::h5

namespace attnscope {

std::string hdf5_library_version() {
  const auto lock = h5::lock_library();
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

}  // namespace attnscope
