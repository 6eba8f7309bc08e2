// Once-per-case summaries shared by the callers of one open dump (see summary_store.h).
#include "core/view/summary_store.h"

#include <chrono>

namespace attnscope {
namespace {

constexpr std::chrono::milliseconds kPollInterval{50};

}  // namespace

Result<std::shared_ptr<const CaseSummary>> SummaryStore::get(
    const std::string& case_path, const Compute& compute, const std::function<bool()>& cancelled) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (const auto it = done_.find(case_path); it != done_.end()) return it->second;
      if (!running_.count(case_path)) break;
      if (cancelled && cancelled()) {
        return Error{ErrorCode::invalid_argument, case_path + ": analysis cancelled", ""};
      }
      changed_.wait_for(lock, kPollInterval);
    }
    running_.insert(case_path);
  }
  Result<CaseSummary> made = compute();
  std::shared_ptr<const CaseSummary> summary;
  if (made) summary = std::make_shared<const CaseSummary>(std::move(made).value());
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    running_.erase(case_path);
    if (summary) done_[case_path] = summary;
  }
  changed_.notify_all();
  if (!summary) return made.error();
  return summary;
}

std::shared_ptr<const CaseSummary> SummaryStore::find(const std::string& case_path) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = done_.find(case_path);
  return it == done_.end() ? nullptr : it->second;
}

}  // namespace attnscope
