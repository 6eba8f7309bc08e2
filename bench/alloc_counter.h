// Counts the bytes held through the global operator new of this executable, so the bench can
// report the peak extra memory of one call (e.g. a pooled heatmap) independently of the
// allocator's caching. The replacement operators live in alloc_counter.cpp.
#pragma once

#include <cstdint>

namespace attnscope::bench {

// Bytes currently allocated through operator new (malloc usable sizes).
int64_t allocated_bytes();

// Starts a measurement: the peak is reset to the current allocation.
void reset_peak_bytes();

// Largest allocation reached since reset_peak_bytes().
int64_t peak_bytes();

}  // namespace attnscope::bench
