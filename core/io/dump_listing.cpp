// Encoding and bounds-checked decoding of a DumpListing (see dump_listing.h). The decoder
// trusts nothing: every token is checked against the bytes left, every count against what
// those bytes could hold, every enum against its range.
#include "core/io/dump_listing.h"

#include <charconv>
#include <cstring>
#include <optional>

namespace attnscope {

namespace {

// Largest payload accepted (a listing of about a million cases).
constexpr uint64_t kMaxPayload = uint64_t{1} << 30;

class Writer {
 public:
  void number(int64_t v) { out_ += std::to_string(v) + ' '; }
  void text(const std::string& s) { out_ += std::to_string(s.size()) + ':' + s; }
  void real(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    out_ += std::to_string(bits) + ' ';
  }
  template <typename T>
  void optional_number(const std::optional<T>& v) {
    number(v ? 1 : 0);
    if (v) number(static_cast<int64_t>(*v));
  }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool failed() const { return failed_; }
  bool done() const { return at_ == in_.size(); }

  // A decimal integer ended by `end`; sets failed() on anything else.
  int64_t number(char end = ' ') {
    if (failed_) return 0;
    const char* first = in_.data() + at_;
    const char* last = in_.data() + in_.size();
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || ptr == last || *ptr != end) return fail();
    at_ = static_cast<size_t>(ptr - in_.data()) + 1;
    return v;
  }
  uint64_t unsigned_number() {
    if (failed_) return 0;
    const char* first = in_.data() + at_;
    const char* last = in_.data() + in_.size();
    uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || ptr == last || *ptr != ' ') return fail();
    at_ = static_cast<size_t>(ptr - in_.data()) + 1;
    return v;
  }
  std::string text() {
    const int64_t size = number(':');
    if (failed_ || size < 0 || static_cast<uint64_t>(size) > in_.size() - at_) {
      fail();
      return {};
    }
    std::string s(in_.substr(at_, static_cast<size_t>(size)));
    at_ += static_cast<size_t>(size);
    return s;
  }
  double real() {
    const uint64_t bits = unsigned_number();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  // A count of items each taking at least `min_bytes` bytes of what is left.
  size_t count(size_t min_bytes) {
    const int64_t n = number();
    if (failed_ || n < 0 || static_cast<uint64_t>(n) * min_bytes > in_.size() - at_) return fail();
    return static_cast<size_t>(n);
  }
  // An enum value in [0, limit).
  int64_t choice(int64_t limit) {
    const int64_t v = number();
    return v >= 0 && v < limit ? v : fail();
  }
  std::optional<int64_t> optional_number() {
    if (choice(2) == 0) return std::nullopt;
    return number();
  }

 private:
  int64_t fail() {
    failed_ = true;
    at_ = in_.size();
    return 0;
  }
  std::string_view in_;
  size_t at_ = 0;
  bool failed_ = false;
};

void put_location(Writer& w, const std::string& key, const TensorLocation& at) {
  w.text(key);
  w.text(at.entry);
  w.number(at.offset);
  w.number(at.big_endian);
  w.number(static_cast<int64_t>(at.strides.size()));
  for (int64_t v : at.strides) w.number(v);
}

std::pair<std::string, TensorLocation> get_location(Reader& r) {
  std::pair<std::string, TensorLocation> out;
  out.first = r.text();
  TensorLocation& at = out.second;
  at.entry = r.text();
  at.offset = r.number();
  at.big_endian = r.choice(2) == 1;
  const size_t rank = r.count(2);
  for (size_t k = 0; k < rank && !r.failed(); ++k) at.strides.push_back(r.number());
  return out;
}

void put_error(Writer& w, const Error& e) {
  w.number(static_cast<int64_t>(e.code));
  w.text(e.message);
  w.text(e.hint);
}

Error get_error(Reader& r) {
  Error e;
  e.code = static_cast<ErrorCode>(r.choice(static_cast<int64_t>(ErrorCode::not_found) + 1));
  e.message = r.text();
  e.hint = r.text();
  return e;
}

void put_case(Writer& w, const CaseInfo& c) {
  w.text(c.path);
  const CaseConfig& cfg = c.config;
  w.number(cfg.scale ? 1 : 0);
  if (cfg.scale) w.real(*cfg.scale);
  w.number(cfg.causal);
  w.number(static_cast<int64_t>(cfg.causal_align));
  w.text(cfg.dtype);
  w.number(static_cast<int64_t>(cfg.layout));
  w.real(cfg.softcap);
  w.optional_number(cfg.step);
  w.optional_number(cfg.layer);
  w.text(cfg.name);
  w.text(cfg.description);
  const RunRecord& run = cfg.run;
  for (const std::string* t :
       {&run.torch_version, &run.backend, &run.device, &run.autocast_dtype, &run.dropout_replay,
        &run.dropout_note, &run.mask_convention, &run.library_version, &run.score_mod,
        &run.score_mod_replay, &run.score_mod_note}) {
    w.text(*t);
  }
  w.real(run.dropout_p);
  w.optional_number(run.micro_batch);
  w.optional_number(run.forward_seq);
  w.optional_number(run.backward_seq);
  const CaseDims& d = c.dims;
  for (int64_t v :
       {d.batch, d.heads, d.kv_heads, d.seqlen_q, d.seqlen_k, d.head_dim, d.head_dim_v}) {
    w.number(v);
  }
  w.number(d.q_broadcast ? 1 : 0);
  w.number(d.kv_broadcast ? 1 : 0);
  w.number(static_cast<int64_t>(c.tensors.size()));
  for (const TensorInfo& t : c.tensors) {
    w.text(t.name);
    w.text(t.dataset);
    w.number(static_cast<int64_t>(t.dtype));
    w.number(static_cast<int64_t>(t.shape.size()));
    for (int64_t v : t.shape) w.number(v);
  }
  w.number(c.packed ? 1 : 0);
  if (c.packed) {
    const PackedSequence& p = *c.packed;
    w.text(p.group);
    for (int64_t v :
         {p.index, p.count, p.q_begin, p.q_end, p.k_begin, p.k_end, p.total_q, p.total_k}) {
      w.number(v);
    }
  }
}

CaseInfo get_case(Reader& r) {
  CaseInfo c;
  c.path = r.text();
  CaseConfig& cfg = c.config;
  if (r.choice(2) == 1) cfg.scale = r.real();
  cfg.causal = r.choice(2) == 1;
  cfg.causal_align = static_cast<CausalAlign>(r.choice(2));
  cfg.dtype = r.text();
  cfg.layout = static_cast<Layout>(r.choice(static_cast<int64_t>(Layout::thd) + 1));
  cfg.softcap = r.real();
  cfg.step = r.optional_number();
  cfg.layer = r.optional_number();
  cfg.name = r.text();
  cfg.description = r.text();
  RunRecord& run = cfg.run;
  for (std::string* t :
       {&run.torch_version, &run.backend, &run.device, &run.autocast_dtype, &run.dropout_replay,
        &run.dropout_note, &run.mask_convention, &run.library_version, &run.score_mod,
        &run.score_mod_replay, &run.score_mod_note}) {
    *t = r.text();
  }
  run.dropout_p = r.real();
  run.micro_batch = r.optional_number();
  run.forward_seq = r.optional_number();
  run.backward_seq = r.optional_number();
  CaseDims& d = c.dims;
  for (int64_t* v :
       {&d.batch, &d.heads, &d.kv_heads, &d.seqlen_q, &d.seqlen_k, &d.head_dim, &d.head_dim_v}) {
    *v = r.number();
  }
  d.q_broadcast = r.choice(2) == 1;
  d.kv_broadcast = r.choice(2) == 1;
  const size_t tensors = r.count(8);
  for (size_t i = 0; i < tensors && !r.failed(); ++i) {
    TensorInfo t;
    t.name = r.text();
    t.dataset = r.text();
    t.dtype = static_cast<DType>(r.choice(static_cast<int64_t>(DType::i64) + 1));
    const size_t rank = r.count(2);
    for (size_t k = 0; k < rank && !r.failed(); ++k) t.shape.push_back(r.number());
    c.tensors.push_back(std::move(t));
  }
  if (r.choice(2) == 1) {
    PackedSequence p;
    p.group = r.text();
    for (int64_t* v :
         {&p.index, &p.count, &p.q_begin, &p.q_end, &p.k_begin, &p.k_end, &p.total_q, &p.total_k}) {
      *v = r.number();
    }
    c.packed = std::move(p);
  }
  return c;
}

Error malformed(const std::string& file, const std::string& problem) {
  return make_error(ErrorCode::io,
                    file + ": attnscope's probe process gave a malformed case listing (" + problem +
                        "); attnscope did not open the file",
                    "the attnscope-probe executable may not match this attnscope build; "
                    "reinstall attnscope or set ATTNSCOPE_PROBE to the matching probe");
}

}  // namespace

std::string location_key(const std::string& case_path, const std::string& dataset) {
  return case_path == "/" ? "/" + dataset : case_path + "/" + dataset;
}

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string encode_listing(const DumpListing& listing) {
  Writer w;
  w.text(listing.format);
  w.number(listing.schema_version);
  w.number(listing.rank.rank);
  w.number(listing.rank.world_size);
  w.number(listing.rank.local_rank);
  w.text(listing.rank.host);
  w.number(listing.health_blocks);
  w.number(static_cast<int64_t>(listing.cases.size()));
  for (const CaseInfo& c : listing.cases) put_case(w, c);
  w.number(static_cast<int64_t>(listing.rejected.size()));
  for (const Error& e : listing.rejected) put_error(w, e);
  w.number(static_cast<int64_t>(listing.broken.size()));
  for (const BrokenCase& b : listing.broken) {
    put_case(w, b.info);
    put_error(w, b.error);
  }
  w.number(static_cast<int64_t>(listing.locations.size()));
  for (const auto& [key, at] : listing.locations) put_location(w, key, at);
  char checksum[17];
  std::snprintf(checksum, sizeof checksum, "%016llx",
                static_cast<unsigned long long>(fnv1a64(w.out_)));
  return "listing " + std::to_string(kListingVersion) + " " + std::to_string(w.out_.size()) + " " +
         checksum + "\n" + w.out_;
}

Result<ListingHeader> parse_listing_header(std::string_view fields) {
  ListingHeader h;
  const char* first = fields.data();
  const char* last = fields.data() + fields.size();
  auto next = [&](auto& value, int base) {
    const auto [ptr, ec] = std::from_chars(first, last, value, base);
    if (ec != std::errc()) return false;
    first = ptr < last && *ptr == ' ' ? ptr + 1 : ptr;
    return true;
  };
  if (!next(h.version, 10) || !next(h.bytes, 10) || !next(h.checksum, 16) || first != last ||
      h.bytes > kMaxPayload) {
    return make_error(ErrorCode::io, "bad listing header '" + std::string(fields) + "'");
  }
  return h;
}

Result<DumpListing> decode_listing(const ListingHeader& header, std::string_view payload,
                                   const std::string& file) {
  if (header.version != kListingVersion) {
    return malformed(file, "version " + std::to_string(header.version) + ", expected " +
                               std::to_string(kListingVersion));
  }
  if (payload.size() != header.bytes) {
    return malformed(
        file, std::to_string(payload.size()) + " of " + std::to_string(header.bytes) + " bytes");
  }
  if (fnv1a64(payload) != header.checksum) return malformed(file, "checksum mismatch");
  Reader r(payload);
  DumpListing listing;
  listing.format = r.text();
  listing.schema_version = static_cast<int>(r.choice(int64_t{1} << 31));
  listing.rank.rank = r.number();
  listing.rank.world_size = r.number();
  listing.rank.local_rank = r.number();
  listing.rank.host = r.text();
  listing.health_blocks = r.number();
  if (listing.health_blocks < kHealthUnreadable) {
    return malformed(file, "negative health block count");
  }
  const size_t cases = r.count(32);
  for (size_t i = 0; i < cases && !r.failed(); ++i) listing.cases.push_back(get_case(r));
  const size_t rejected = r.count(6);
  for (size_t i = 0; i < rejected && !r.failed(); ++i) listing.rejected.push_back(get_error(r));
  const size_t broken = r.count(38);
  for (size_t i = 0; i < broken && !r.failed(); ++i) {
    BrokenCase b;
    b.info = get_case(r);
    b.error = get_error(r);
    listing.broken.push_back(std::move(b));
  }
  const size_t locations = r.count(10);
  for (size_t i = 0; i < locations && !r.failed(); ++i) listing.locations.insert(get_location(r));
  if (r.failed()) return malformed(file, "truncated or invalid token");
  if (!r.done()) return malformed(file, "trailing bytes");
  return listing;
}

}  // namespace attnscope
