// DumpReader: picks the format from the file's first bytes (dump_format.h), holds the source
// that reads it (dump_source.h) and the listing of its cases, and loads one case's tensors on
// demand into canonical layout within the memory budget.
#include <mutex>

#include "core/io/dump_format.h"
#include "core/io/dump_source.h"
#include "core/io/input_path.h"
#include "core/io/packed_sequences.h"
#include "core/memory_budget.h"

namespace attnscope {

struct DumpReader::State {
  std::string path;
  std::unique_ptr<DumpSource> source;
  DumpListing listing;
  mutable std::mutex mutex;  // guards loads
  size_t loads = 0;          // load() calls
};

namespace {

const char* const kSchemaHint =
    "schema 1: a case is any group holding datasets q, k, v (optional do, mask, bias, o, lse, "
    "dq, dk, dv) with attributes scale, causal, layout, ...; see DESIGN §2 (a .pt / .npz / "
    ".safetensors file: a dict of tensors q, k, v, ... or of such dicts)";

// Bytes load() holds at its peak: every tensor in canonical layout (a broadcast q or k, v
// repeated to the batch) plus the largest one's raw read buffer (saturating; shapes were
// bounded by discovery).
int64_t load_bytes(const CaseInfo& info) {
  int64_t total = 0, largest = 0;
  for (const TensorInfo& t : info.tensors) {
    int64_t bytes = static_cast<int64_t>(dtype_size(t.dtype));
    for (int64_t d : t.shape) bytes = saturating_product({bytes, d});
    if (info.dims.batch_repeated(t.name)) bytes = saturating_product({bytes, info.dims.batch});
    largest = std::max(largest, bytes);
    if (__builtin_add_overflow(total, bytes, &total)) return INT64_MAX;
  }
  return __builtin_add_overflow(total, largest, &total) ? INT64_MAX : total;
}

// A dump that holds the recorder's health statistics and nothing else (no case went
// non-finite under when="nonfinite"): opened with no case.
bool statistics_only(const DumpListing& listing) {
  return listing.cases.empty() && listing.health_blocks > 0 && listing.rejected.empty() &&
         listing.broken.empty();
}

Error no_case_error(const std::string& path, const DumpListing& listing) {
  if (!listing.broken.empty()) {
    Error first = listing.broken.front().error;
    if (listing.broken.size() > 1) {
      first.message +=
          " (and " + std::to_string(listing.broken.size() - 1) + " more unreadable cases)";
    }
    return first;
  }
  if (listing.rejected.empty() && listing.health_error) {  // statistics only, and unreadable
    return make_error(ErrorCode::format,
                      path + ": no case, and its health statistics cannot be read: " +
                          listing.health_error->message,
                      listing.health_error->hint);
  }
  if (listing.rejected.empty()) {
    return make_error(ErrorCode::format, path + ": no case (group with datasets q, k, v) found",
                      kSchemaHint);
  }
  Error first = listing.rejected.front();
  if (listing.rejected.size() > 1) {
    first.message += " (and " + std::to_string(listing.rejected.size() - 1) + " more rejected)";
  }
  return first;
}

bool is_zip_format(const std::string& format) {
  return format == dump_format_name(DumpFormat::pt) || format == dump_format_name(DumpFormat::npz);
}

}  // namespace

DumpReader::DumpReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
DumpReader::DumpReader(DumpReader&&) noexcept = default;
DumpReader& DumpReader::operator=(DumpReader&&) noexcept = default;
DumpReader::~DumpReader() = default;

Result<DumpReader> DumpReader::adopt(Result<OpenedSource> opened, const std::string& path) {
  if (!opened) return opened.error();
  const bool statistics = statistics_only(opened->listing);
  if (opened->listing.cases.empty() && !statistics) return no_case_error(path, opened->listing);
  expand_packed_cases(*opened->source, path, opened->listing);
  if (opened->listing.cases.empty() && !statistics) return no_case_error(path, opened->listing);
  auto state = std::make_unique<State>();
  state->path = path;
  state->source = std::move(opened->source);
  state->listing = std::move(opened->listing);
  return DumpReader(std::move(state));
}

Result<DumpReader> DumpReader::open(const std::string& path, const OpenOptions& options) {
  if (Status file = check_dump_file(path); !file) return file.error();
  const Container container = sniff_file(path);
  if (container == Container::hdf5) return adopt(open_hdf5_source(path, options), path);
  return adopt(open_located_source(path, container == Container::zip, options), path);
}

Result<DumpReader> DumpReader::open_image(const void* data, size_t size, const std::string& name,
                                          const OpenOptions& options) {
  const auto* head = static_cast<const uint8_t*>(data);
  const Container container =
      head == nullptr ? Container::hdf5 : sniff_container(head, std::min<size_t>(size, 16));
  if (container == Container::hdf5) {
    return adopt(open_hdf5_image_source(data, size, name, options), name);
  }
  return adopt(open_located_image_source(data, size, name, container == Container::zip, options),
               name);
}

Result<DumpReader> DumpReader::open_listed(const std::string& path, DumpListing listing,
                                           const OpenOptions& options) {
  if (Status file = check_dump_file(path); !file) return file.error();
  const Container container = sniff_file(path);
  const bool hdf5 = listing.format == dump_format_name(DumpFormat::hdf5);
  const bool zip = is_zip_format(listing.format);
  if ((container == Container::hdf5) != hdf5 || (container == Container::zip) != zip) {
    return make_error(ErrorCode::io,
                      path + ": the file changed since attnscope's probe read it (it was " +
                          (listing.format.empty() ? "?" : listing.format) + ")",
                      "reopen the file once it is no longer being written");
  }
  if (listing.cases.empty() && !statistics_only(listing)) return no_case_error(path, listing);
  if (hdf5) return adopt(listed_hdf5_source(path, std::move(listing), options), path);
  return adopt(listed_located_source(path, zip, std::move(listing), options), path);
}

const std::string& DumpReader::path() const {
  return state_->path;
}
const std::string& DumpReader::format() const {
  return state_->listing.format;
}
int64_t DumpReader::health_blocks() const {
  return state_->listing.health_blocks;
}
const std::optional<Error>& DumpReader::health_error() const {
  return state_->listing.health_error;
}
int DumpReader::schema_version() const {
  return state_->listing.schema_version;
}
const RankIdentity& DumpReader::rank_identity() const {
  return state_->listing.rank;
}
const std::vector<CaseInfo>& DumpReader::cases() const {
  return state_->listing.cases;
}
const std::vector<Error>& DumpReader::rejected() const {
  return state_->listing.rejected;
}
const std::vector<BrokenCase>& DumpReader::broken() const {
  return state_->listing.broken;
}
DumpListing DumpReader::listing() const {
  return state_->listing;
}
DumpListing DumpReader::take_listing() {
  return std::exchange(state_->listing, DumpListing{});
}

Status DumpReader::check_data(int64_t sample_bytes,
                              const std::function<void(const std::string&)>& on_dataset) const {
  for (const CaseInfo& info : state_->listing.cases) {
    Status read = check_case(info, sample_bytes, on_dataset);
    if (!read) return read;
  }
  return Ok{};
}

Status DumpReader::check_case(const CaseInfo& info, int64_t sample_bytes,
                              const std::function<void(const std::string&)>& on_dataset) const {
  return state_->source->check_case(info, sample_bytes, on_dataset);
}

std::shared_ptr<void> DumpReader::keep_open() const {
  return state_->source->keep_open();
}

size_t DumpReader::loads() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->loads;
}

Result<CaseData> DumpReader::load(const std::string& case_path) const {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    ++state_->loads;
  }
  const std::string wanted = case_path.empty() || case_path[0] != '/' ? "/" + case_path : case_path;
  const CaseInfo* info = nullptr;
  for (const CaseInfo& c : state_->listing.cases) {
    if (c.path == wanted) info = &c;
  }
  for (const BrokenCase& b : state_->listing.broken) {
    if (b.info.path == wanted) return b.error;
  }
  if (info == nullptr) {
    return make_error(ErrorCode::not_found, state_->path + ": no case at '" + case_path + "'",
                      "list the cases with `attnscope-cli scan " + state_->path + "`");
  }
  Status fits =
      check_memory(state_->path + ": " + info->path + ": loading its tensors", load_bytes(*info));
  if (!fits) return fits.error();
  CaseData data;
  data.info = *info;
  const CaseDims stored_as = stored_dims(*info);
  Result<std::vector<HostTensor>> stored = state_->source->read_tensors(*info);
  if (!stored) return stored.error();
  for (size_t i = 0; i < info->tensors.size(); ++i) {
    const std::string& name = info->tensors[i].name;
    data.tensors[name] = to_canonical(name, (*stored)[i], info->config.layout, stored_as);
    (*stored)[i] = HostTensor{};  // within load_bytes: the stored bytes plus the largest copy
  }
  if (info->packed) cut_packed_sequence(data);
  expand_broadcast_batch(data);
  return data;
}

}  // namespace attnscope
