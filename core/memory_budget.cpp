// Memory budget: parsing sizes, the process-wide budget (override > environment > half of the
// physical memory), and the checks that compare a computation's size with it.
#include "core/memory_budget.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>

namespace attnscope {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::mutex& budget_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::optional<MemoryBudget>& budget_override() {
  static std::optional<MemoryBudget> value;
  return value;
}

MemoryBudget default_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  const int64_t physical =
      pages > 0 && page > 0 ? saturating_product({pages, page}) : int64_t{8} << 30;
  return {physical / 2, "default (half of " + format_bytes(physical) + " physical memory)"};
}

}  // namespace

std::optional<int64_t> parse_byte_size(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double number = std::strtod(begin, &end);
  if (end == begin || errno != 0 || !std::isfinite(number) || number <= 0) return std::nullopt;
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit[0] == ' ') unit.erase(0, 1);
  if (unit.size() == 3 && unit.compare(1, 2, "IB") == 0) {
    unit.erase(1);
  } else if (unit.size() == 2 && unit[1] == 'B') {
    unit.erase(1);
  } else if (unit == "B") {
    unit.clear();
  }
  double scale = 1;
  if (unit == "K") scale = 1024.0;
  if (unit == "M") scale = 1024.0 * 1024;
  if (unit == "G") scale = 1024.0 * 1024 * 1024;
  if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  if (!unit.empty() && scale == 1) return std::nullopt;
  const double bytes = std::floor(number * scale);
  if (bytes < 1 || bytes >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

std::string format_bytes(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, value < 10 ? "%.2g %s" : "%.0f %s", value, units[unit]);
  return text;
}

MemoryBudget memory_budget() {
  std::lock_guard<std::mutex> lock(budget_mutex());
  if (budget_override()) return *budget_override();
  if (const char* env = std::getenv(kMemoryBudgetEnv)) {
    if (auto bytes = parse_byte_size(env)) return {*bytes, kMemoryBudgetEnv};
  }
  return default_budget();
}

Status set_memory_budget(const std::string& text, const std::string& origin) {
  const std::optional<int64_t> bytes = parse_byte_size(text);
  if (!bytes) {
    return make_error(ErrorCode::invalid_argument, origin + ": '" + text + "' is not a memory size",
                      "write bytes or a size with a unit: 1073741824, 512M, 8G, 1.5GiB");
  }
  std::lock_guard<std::mutex> lock(budget_mutex());
  budget_override() = MemoryBudget{*bytes, origin};
  return Ok{};
}

void clear_memory_budget() {
  std::lock_guard<std::mutex> lock(budget_mutex());
  budget_override().reset();
}

Status check_memory(const std::string& what, int64_t bytes) {
  const MemoryBudget budget = memory_budget();
  if (bytes <= budget.bytes) return Ok{};
  const std::string size = bytes == kMax
                               ? "more than 2^63 bytes"
                               : format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes)";
  return make_error(ErrorCode::too_large,
                    what + " needs " + size + ", more than the memory budget of " +
                        format_bytes(budget.bytes) + " (from " + budget.origin + ")",
                    std::string("raise the budget with --memory-budget SIZE or ") +
                        kMemoryBudgetEnv +
                        "=SIZE if the machine has the memory, or select a "
                        "smaller case / window");
}

int64_t saturating_product(std::initializer_list<int64_t> factors) {
  int64_t out = 1;
  for (int64_t f : factors) {
    if (f <= 0) return 0;
    if (__builtin_mul_overflow(out, f, &out)) return kMax;
  }
  return out;
}

int64_t full_score_bytes(const CaseDims& dims, int matrices) {
  const int64_t entries =
      saturating_product({dims.batch, dims.heads, dims.seqlen_q, dims.seqlen_k});
  return saturating_product({entries, int64_t{4} * matrices + 1});
}

MatrixResolution head_matrix_resolution(int64_t rows, int64_t cols) {
  const int64_t bytes = saturating_product({rows, cols, 17});
  return bytes <= memory_budget().bytes / 4 ? MatrixResolution::full : MatrixResolution::pooled;
}

}  // namespace attnscope
