// The summaries of one open dump's cases at the recorded run (summarize_case with the run
// choice left empty), computed once whoever asks first: the window's dump scan (badges, lead to
// the problem) and the findings list of the shown case share them, so a case is analysed once
// and never twice at the same time (at real size each analysis holds about a gigabyte).
// Thread-safe; plain C++, no Qt.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "core/result.h"
#include "core/view/case_summary.h"

namespace attnscope {

class SummaryStore {
 public:
  using Compute = std::function<Result<CaseSummary>()>;

  // The summary of `case_path`: the stored one; else, while another caller computes it, that
  // one once it is done (polling `cancelled`; a computation that fails or is cancelled there
  // leaves the work to this call); else compute() here, stored when it succeeds. Fails with
  // compute()'s error, or ("cancelled") once `cancelled` returns true while waiting.
  Result<std::shared_ptr<const CaseSummary>> get(const std::string& case_path,
                                                 const Compute& compute,
                                                 const std::function<bool()>& cancelled);
  // The stored summary, else null.
  std::shared_ptr<const CaseSummary> find(const std::string& case_path) const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::shared_ptr<const CaseSummary>> done_;
  std::set<std::string> running_;  // cases some caller is computing
};

}  // namespace attnscope
