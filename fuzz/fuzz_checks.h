// Invariants every fuzz target checks on what a reader accepted (fuzz/*_fuzz.cpp): a listed
// case is a valid case, a loaded one holds exactly its shapes' bytes in canonical layout, and
// the listing the probe would send (tensor locations included) survives its encoding. Any
// violation aborts, which libFuzzer reports as a crash.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/io/dump_listing.h"
#include "core/io/hdf5_dump.h"

namespace attnscope::fuzz {

inline void require(bool condition) {
  if (!condition) std::abort();
}

inline void check_case(const CaseInfo& info) {
  const CaseDims& d = info.dims;
  require(d.batch > 0 && d.heads > 0 && d.kv_heads > 0 && d.seqlen_q > 0 && d.seqlen_k > 0 &&
          d.head_dim > 0 && d.head_dim_v > 0);
  require(d.heads % d.kv_heads == 0);
  require(info.has("q") && info.has("k") && info.has("v"));
  if (const auto& p = info.packed) {  // a sequence of a packed group lies inside its tokens
    require(0 <= p->index && p->index < p->count && 0 <= p->q_begin && p->q_begin < p->q_end &&
            p->q_end <= p->total_q && 0 <= p->k_begin && p->k_begin < p->k_end &&
            p->k_end <= p->total_k && d.seqlen_q == p->q_end - p->q_begin &&
            d.seqlen_k == p->k_end - p->k_begin && !info.has("cu_seqlens_q"));
  }
}

inline void check_loaded(const CaseData& data) {
  for (const auto& [name, t] : data.tensors) {
    require(t.bytes.size() == static_cast<size_t>(t.numel()) * dtype_size(t.dtype));
  }
  const CaseDims& d = data.info.dims;
  require(data.q().shape == std::vector<int64_t>({d.batch, d.heads, d.seqlen_q, d.head_dim}));
  require(data.k().shape == std::vector<int64_t>({d.batch, d.kv_heads, d.seqlen_k, d.head_dim}));
}

// Decodes what encode_listing wrote; aborts when it does not decode.
inline DumpListing reread(const std::string& encoded, const std::string& file) {
  const size_t newline = encoded.find('\n');
  require(newline != std::string::npos);
  const Result<ListingHeader> header =
      parse_listing_header(std::string_view(encoded).substr(8, newline - 8));
  require(header.ok());
  Result<DumpListing> back =
      decode_listing(*header, std::string_view(encoded).substr(newline + 1), file);
  require(back.ok());
  return std::move(back).value();
}

// Opens an image, then checks the listing's round trip, the probe's test reads and every load;
// `name` must start every error message.
inline void open_and_check(const uint8_t* data, size_t size, const std::string& name,
                           int64_t sample_bytes) {
  OpenOptions options;
  options.max_tensor_bytes = int64_t{16} << 20;
  Result<DumpReader> dump = DumpReader::open_image(data, size, name, options);
  if (!dump) {
    require(dump.error().message.rfind(name, 0) == 0 && !dump.error().hint.empty());
    return;
  }
  const DumpListing back = reread(encode_listing(dump->listing()), name);
  require(back.cases.size() == dump->cases().size() &&
          back.rejected.size() == dump->rejected().size() &&
          back.locations == dump->listing().locations && back.format == dump->format());
  const Status sampled = dump->check_data(sample_bytes);
  require(sampled.ok() ||
          (sampled.error().message.rfind(name + ": ", 0) == 0 && !sampled.error().hint.empty()));
  for (const CaseInfo& info : dump->cases()) {
    check_case(info);
    Result<CaseData> loaded = dump->load(info.path);
    if (loaded) check_loaded(*loaded);
  }
}

}  // namespace attnscope::fuzz
