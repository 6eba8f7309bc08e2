// Dumps for the whole-dump scan tests, written with the HDF5 C API (fast enough for thousands of
// cases): cases /scan/step_NNNNN/layer_00 (attributes step = N, layer = 0) holding q, k, v, do
// as float32 [1, 2, seq, dim], chunked [1, 1, written, dim] with fill value 0. Only rows
// [0, written) of each head are written (deterministic values in [-2, 2)); the other chunks are
// never allocated, so a file can declare gigabytes while holding megabytes on disk, and reading
// returns their zeros.
#pragma once

#include <cstdint>
#include <string>

namespace attnscope::test {

struct ScanDumpSpec {
  int cases = 300;
  int64_t seq = 256, dim = 64;
  int64_t written = 32;  // rows per head that hold data; <= seq
  int nanEvery = 100;    // cases 0, nanEvery, ... hold one NaN in v[0, 1, 3, 5]
};

// Declared bytes of all q / k / v / do datasets of the file.
int64_t declaredBytes(const ScanDumpSpec& spec);

// Exact non-finite count (o + lse + dq, the overview's metric) of case n at any precision: a NaN
// in v[0, 1, 3, 5] makes o[.., 5] of every row of head 1 NaN and, through D = rowsum(dO * O)
// and dS = P * (dP - D), every dQ element of head 1; LSE stays finite.
int64_t expectedNonfinite(const ScanDumpSpec& spec, int n);

// "/scan/step_NNNNN/layer_00"
std::string scanCasePath(int n);

// Writes the dump to `path` (replaced); false with *error set on an HDF5 failure.
bool writeScanDump(const std::string& path, const ScanDumpSpec& spec, std::string* error);

}  // namespace attnscope::test
