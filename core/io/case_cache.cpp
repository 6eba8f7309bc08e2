// CaseCache: most-recently-used cases of one reader, read once each (see case_cache.h).
#include "core/io/case_cache.h"

#include <algorithm>
#include <utility>

namespace attnscope {

CaseCache::CaseCache(std::shared_ptr<const DumpReader> reader, size_t capacity)
    : reader_(std::move(reader)), capacity_(std::max<size_t>(capacity, 1)) {}

namespace {

// DumpReader::load accepts the path with or without its leading '/': key on one spelling.
std::string key_of(const std::string& case_path) {
  return !case_path.empty() && case_path.front() == '/' ? case_path : "/" + case_path;
}

}  // namespace

bool CaseCache::learn(const std::string& case_path, const InferredRun& inferred) {
  if (!inferred.any()) return false;
  const std::string key = key_of(case_path);
  const std::lock_guard<std::mutex> lock(mutex_);
  InferredRun& known = inferred_[key];
  if (known == inferred) return false;
  known = inferred;
  return true;
}

InferredRun CaseCache::inferred(const std::string& case_path) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = inferred_.find(key_of(case_path));
  return it == inferred_.end() ? InferredRun{} : it->second;
}

Result<std::shared_ptr<const CaseData>> CaseCache::get(const std::string& case_path, Keep keep) {
  const std::string key = key_of(case_path);
  const InferredRun learned = inferred(key);
  // The case as read, with the learned run applied (a copy, made once per slot).
  const auto judged = [&learned](std::shared_ptr<const CaseData> data) {
    if (!learned.any() || data->info.config.run.inferred.any()) return data;
    auto copy = std::make_shared<CaseData>(*data);
    apply_inferred_run(copy->info.config, learned);
    return std::shared_ptr<const CaseData>(std::move(copy));
  };
  std::shared_ptr<Slot> slot;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const Entry& e) { return e.path == key; });
    if (it != entries_.end()) {
      entries_.splice(entries_.begin(), entries_, it);
      slot = it->slot;
    } else if (keep == Keep::yes) {
      slot = std::make_shared<Slot>();
      entries_.push_front(Entry{key, slot});
      if (entries_.size() > capacity_) entries_.pop_back();
    }
  }
  if (!slot) {  // Keep::no and not cached: read for this caller alone
    Result<CaseData> loaded = reader_->load(key);
    if (!loaded) return loaded.error();
    return judged(std::make_shared<const CaseData>(std::move(loaded).value()));
  }
  const std::lock_guard<std::mutex> lock(slot->mutex);
  if (slot->data) return slot->data = judged(slot->data);
  Result<CaseData> loaded = reader_->load(key);
  if (!loaded) {
    const std::lock_guard<std::mutex> drop(mutex_);
    entries_.remove_if([&](const Entry& e) { return e.slot == slot; });
    return loaded.error();
  }
  slot->data = judged(std::make_shared<const CaseData>(std::move(loaded).value()));
  return slot->data;
}

}  // namespace attnscope
