// Memory budget (issue 7): the bytes one computation may hold at once, so attnscope refuses or
// streams instead of swapping the machine to death. Taken from set_memory_budget (the CLI's
// --memory-budget), else the environment variable ATTNSCOPE_MEMORY_BUDGET, else half of the
// physical memory. Sizes are written "1073741824", "512M", "8G", "1.5GiB" (K/M/G/T are powers
// of 1024; a trailing "B" / "iB" is optional).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/case_model.h"
#include "core/result.h"

namespace attnscope {

struct MemoryBudget {
  int64_t bytes = 0;
  std::string origin;  // "--memory-budget", "ATTNSCOPE_MEMORY_BUDGET", "default (half of ...)"
};

inline constexpr const char* kMemoryBudgetEnv = "ATTNSCOPE_MEMORY_BUDGET";

// "64M" -> 67108864; nullopt for text that is not a positive size below 2^63.
std::optional<int64_t> parse_byte_size(const std::string& text);
// 1610612736 -> "1.5 GiB"; below 1 KiB "N bytes".
std::string format_bytes(int64_t bytes);

// The budget in force (see the file comment). Thread-safe.
MemoryBudget memory_budget();
// Overrides the budget for this process; fails (invalid_argument, naming `origin`) when `text`
// is not a size.
Status set_memory_budget(const std::string& text, const std::string& origin);
// Drops an override, so the environment / default apply again.
void clear_memory_budget();

// Ok when `bytes` fit the budget; else too_large: "<what> needs 1.5 GiB (N bytes), more than
// the memory budget of 512 MiB (from ORIGIN)" with a hint naming --memory-budget and the
// environment variable.
Status check_memory(const std::string& what, int64_t bytes);

// a * b * ... saturating at INT64_MAX (sizes computed from untrusted shapes).
int64_t saturating_product(std::initializer_list<int64_t> factors);

// Bytes of `matrices` fp32 score-shaped matrices of one case (B * H * Sq * Sk each), plus one
// mask byte per entry: what materialising S, P, dP, dS at full resolution costs.
int64_t full_score_bytes(const CaseDims& dims, int matrices = 4);

// How the score-shaped matrices of one head are shown: at full resolution when a window of
// rows x cols (4 fp32 matrices + the mask) fits a quarter of the budget, else pooled.
enum class MatrixResolution { full, pooled };
MatrixResolution head_matrix_resolution(int64_t rows, int64_t cols);

}  // namespace attnscope
