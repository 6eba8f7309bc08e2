// One read per case of an open dump: every consumer of a case (the GUI's head compute, case
// summary, scale sweep, stepper) shares one immutable CaseData instead of calling
// DumpReader::load each. Keeps the `capacity` most recently used cases; walks over many cases
// (series, scan) peek at the cache without filling it, so they never push out the case on
// screen. A failed load is not kept (the next get() reads again). Thread-safe: concurrent
// get()s of one case read it once, the others wait for that read. What an analysis inferred
// about a case's run (learn()) is applied to the case every get() returns from then on, so
// the views judge it as the findings do.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/case_model.h"
#include "core/io/hdf5_dump.h"
#include "core/result.h"

namespace attnscope {

class CaseCache {
 public:
  enum class Keep { yes, no };  // no: a case not cached is read for this caller only

  explicit CaseCache(std::shared_ptr<const DumpReader> reader, size_t capacity = 2);

  const std::shared_ptr<const DumpReader>& reader() const { return reader_; }
  // The case at `case_path` ("/step_1/layer_0"), read on first use; load()'s errors.
  Result<std::shared_ptr<const CaseData>> get(const std::string& case_path, Keep keep = Keep::yes);
  // Records the run inferred for a case (an empty one changes nothing); true when it is new.
  bool learn(const std::string& case_path, const InferredRun& inferred);
  // The run learned for a case; empty when none was.
  InferredRun inferred(const std::string& case_path) const;

 private:
  // One cached case; `data` is filled once under `mutex` (a reader waiting for it holds that
  // mutex, not the cache's).
  struct Slot {
    std::mutex mutex;
    std::shared_ptr<const CaseData> data;
  };
  struct Entry {
    std::string path;
    std::shared_ptr<Slot> slot;
  };

  std::shared_ptr<const DumpReader> reader_;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;                     // most recently used first; at most capacity_
  std::map<std::string, InferredRun> inferred_;  // by key (leading '/')
};

}  // namespace attnscope
