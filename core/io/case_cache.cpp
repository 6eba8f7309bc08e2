// CaseCache: most-recently-used cases of one reader, read once each (see case_cache.h).
#include "core/io/case_cache.h"

#include <algorithm>
#include <utility>

namespace attnscope {

CaseCache::CaseCache(std::shared_ptr<const DumpReader> reader, size_t capacity)
    : reader_(std::move(reader)), capacity_(std::max<size_t>(capacity, 1)) {}

Result<std::shared_ptr<const CaseData>> CaseCache::get(const std::string& case_path, Keep keep) {
  // DumpReader::load accepts the path with or without its leading '/': key on one spelling.
  const std::string key =
      !case_path.empty() && case_path.front() == '/' ? case_path : "/" + case_path;
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
    return std::shared_ptr<const CaseData>(
        std::make_shared<const CaseData>(std::move(loaded).value()));
  }
  const std::lock_guard<std::mutex> lock(slot->mutex);
  if (slot->data) return slot->data;
  Result<CaseData> loaded = reader_->load(key);
  if (!loaded) {
    const std::lock_guard<std::mutex> drop(mutex_);
    entries_.remove_if([&](const Entry& e) { return e.slot == slot; });
    return loaded.error();
  }
  slot->data = std::make_shared<const CaseData>(std::move(loaded).value());
  return slot->data;
}

}  // namespace attnscope
