// HDF5 C API writer of the scan-test dumps (see ScanDump.h).
#include "tests/gui/ScanDump.h"

#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace attnscope::test {
namespace {

constexpr const char* kTensors[] = {"q", "k", "v", "do"};

// Closes an HDF5 handle with its close function when it leaves scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// Deterministic values in [-2, 2) (xorshift64*), distinct per case and tensor.
void fill(std::vector<float>& x, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& v : x) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    const uint64_t r = s * 0x2545F4914F6CDD1Dull;
    v = static_cast<float>(static_cast<double>(r >> 11) / 9007199254740992.0 * 4.0 - 2.0);
  }
}

bool setIntAttribute(hid_t group, const char* name, int64_t value) {
  const Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  const Handle attr(H5Acreate2(group, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                    H5Aclose);
  return attr.ok() && H5Awrite(attr.get(), H5T_NATIVE_INT64, &value) >= 0;
}

// q / k / v / do of case n: [1, 2, seq, dim] declared, rows [0, written) of both heads written.
bool writeTensor(hid_t group, const char* name, const ScanDumpSpec& spec, int n, int t) {
  const hsize_t dims[4] = {1, 2, static_cast<hsize_t>(spec.seq), static_cast<hsize_t>(spec.dim)};
  const hsize_t chunk[4] = {1, 1, static_cast<hsize_t>(spec.written),
                            static_cast<hsize_t>(spec.dim)};
  const Handle space(H5Screate_simple(4, dims, nullptr), H5Sclose);
  const Handle plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  const float zero = 0.0f;
  if (!plist.ok() || H5Pset_chunk(plist.get(), 4, chunk) < 0 ||
      H5Pset_fill_value(plist.get(), H5T_NATIVE_FLOAT, &zero) < 0) {
    return false;
  }
  const Handle set(
      H5Dcreate2(group, name, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT),
      H5Dclose);
  if (!set.ok()) return false;
  std::vector<float> x(static_cast<size_t>(2 * spec.written * spec.dim));
  fill(x, static_cast<uint64_t>(n) * 4 + static_cast<uint64_t>(t));
  if (t == 2 && n % spec.nanEvery == 0 && spec.written > 3 && spec.dim > 5) {
    x[static_cast<size_t>((spec.written + 3) * spec.dim + 5)] = std::nanf("");  // v[0, 1, 3, 5]
  }
  const hsize_t start[4] = {0, 0, 0, 0};
  const hsize_t count[4] = {1, 2, static_cast<hsize_t>(spec.written),
                            static_cast<hsize_t>(spec.dim)};
  const Handle memory(H5Screate_simple(4, count, nullptr), H5Sclose);
  return H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0 &&
         H5Dwrite(set.get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), H5P_DEFAULT, x.data()) >=
             0;
}

}  // namespace

int64_t declaredBytes(const ScanDumpSpec& spec) {
  return int64_t{spec.cases} * 4 * 2 * spec.seq * spec.dim * int64_t{sizeof(float)};
}

int64_t expectedNonfinite(const ScanDumpSpec& spec, int n) {
  return n % spec.nanEvery == 0 ? spec.seq * (1 + spec.dim) : 0;
}

std::string scanCasePath(int n) {
  char path[64];
  std::snprintf(path, sizeof(path), "/scan/step_%05d/layer_00", n);
  return path;
}

bool writeScanDump(const std::string& path, const ScanDumpSpec& spec, std::string* error) {
  const Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) {
    *error = path + ": cannot create the file";
    return false;
  }
  const Handle links(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(links.get(), 1);
  for (int n = 0; n < spec.cases; ++n) {
    const std::string group_path = scanCasePath(n);
    const Handle group(
        H5Gcreate2(file.get(), group_path.c_str(), links.get(), H5P_DEFAULT, H5P_DEFAULT),
        H5Gclose);
    bool ok = group.ok() && setIntAttribute(group.get(), "step", n) &&
              setIntAttribute(group.get(), "layer", 0);
    for (int t = 0; t < 4 && ok; ++t) ok = writeTensor(group.get(), kTensors[t], spec, n, t);
    if (!ok) {
      *error = path + ": " + group_path + ": HDF5 write failed";
      return false;
    }
  }
  return true;
}

}  // namespace attnscope::test
