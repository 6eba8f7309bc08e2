// Helpers for the io tests: a deterministic value pattern shared with h5py_fixture.py, case
// builders, exact (bitwise) tensor comparison and a small C-API file crafter for odd dumps.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/case_model.h"
#include "core/io/hdf5_dump.h"

namespace attnscope::test {

// Directory under the build tree where the tests write their files (created on first use).
std::string data_dir();
std::string data_file(const std::string& name);

// The value pattern of h5py_fixture.py: ((i * 37 + seed * 11) mod 101 - 50) / 16, exact in
// float16 / bfloat16 / float32 / float64.
double pattern(int64_t i, int seed);
std::vector<double> pattern_values(int64_t n, int seed);

// A tensor of `shape` filled with pattern(i, seed); when `specials` is set a few leading
// elements are -0.0, the smallest float16 subnormal, +inf and NaN.
HostTensor pattern_tensor(DType dtype, std::vector<int64_t> shape, int seed, bool specials = false);
// A mask of `shape` with (i % 3 != 0) as attend.
HostTensor mask_tensor(DType dtype, std::vector<int64_t> shape);

// Canonical sizes of a test case.
struct Sizes {
  int64_t b = 2, h = 4, hk = 2, sq = 5, sk = 7, d = 8, dv = 6;
};
// A case with q, k, v (canonical) in `dtype`; `all` adds do, mask, bias, o, lse, dq, dk, dv.
CaseData make_case(const Sizes& s, DType dtype, Layout layout, bool all);

// Bitwise equality of dtype, shape and bytes, with a readable failure.
void expect_same_tensor(const HostTensor& expected, const HostTensor& actual,
                        const std::string& what);

// DumpReader::open(path), which must succeed (the test aborts with the error otherwise).
DumpReader open_ok(const std::string& path);

// Writes one case with DumpWriter and returns the file path.
std::string write_one(const std::string& file, const std::string& group, const CaseData& data,
                      const WriteOptions& options = {});

// Crafts HDF5 files with the C API (for layouts the writer never produces). Every path may
// name missing intermediate groups.
class Craft {
 public:
  explicit Craft(const std::string& path);
  ~Craft();
  Craft(const Craft&) = delete;
  Craft& operator=(const Craft&) = delete;

  hid_t file() const { return file_; }
  void group(const std::string& path);
  // A dataset of `type` (memory layout of `memory_type`, default `type`) from `data` (may be
  // null: no data written).
  void dataset(const std::string& path, hid_t type, const std::vector<hsize_t>& dims,
               const void* data, hid_t memory_type = -1, hid_t dcpl = H5P_DEFAULT);
  // A float32 dataset filled with pattern(i, seed).
  void f32(const std::string& path, const std::vector<hsize_t>& dims, int seed = 1);
  // q, k, v float32 of a small valid BHSD case under `group`.
  void qkv(const std::string& group, hsize_t b = 1, hsize_t h = 2, hsize_t s = 3, hsize_t d = 4);
  void string_attr(const std::string& object, const char* name, const std::string& value);
  void double_attr(const std::string& object, const char* name, double value);
  void int_attr(const std::string& object, const char* name, int64_t value);
  void close();

 private:
  hid_t file_ = -1;
  hid_t lcpl_ = -1;
};

// Asserts that opening `path` fails with `code`, that the message names the file, that there
// is a hint, and that message or hint contain each of `names`.
void expect_open_error(const std::string& path, ErrorCode code,
                       const std::vector<std::string>& names, const OpenOptions& options = {});

}  // namespace attnscope::test
