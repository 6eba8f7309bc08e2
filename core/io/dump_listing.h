// What opening a dump learns before any case is loaded (its listing: cases, rejected groups,
// cases whose data cannot be read), and its compact encoding for the attnscope-probe channel:
// the probe discovers the file once and hands the listing to the parent, which opens the dump
// without walking it again (issue 7).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/case_model.h"
#include "core/io/tensor_location.h"
#include "core/result.h"

namespace attnscope {

// A valid case whose stored data could not be read (a failed or crashing test read). It is
// kept out of DumpReader::cases(): nothing ever loads it.
struct BrokenCase {
  CaseInfo info;
  Error error;  // names the file, the dataset and the problem
};

// Which process of a multi-rank run wrote the dump: the recorder's root attributes rank,
// world_size, local_rank and host under torch.distributed; -1 / "" when absent.
struct RankIdentity {
  int64_t rank = -1, world_size = -1, local_rank = -1;
  std::string host;
};

struct DumpListing {
  std::string format;      // dump_format_name(): "hdf5", "pt", "npz", "safetensors"
  int schema_version = 0;  // the file's kSchemaVersionAttribute, 0 when absent
  RankIdentity rank;       // HDF5 root attributes; absent in other formats
  // HDF5: datasets in /health (the recorder's statistics); kHealthUnreadable when the probe
  // died reading them (health_error says how; not encoded: the parent knows it).
  int64_t health_blocks = 0;
  std::optional<Error> health_error;
  std::vector<CaseInfo> cases;     // case order (sort_cases)
  std::vector<Error> rejected;     // groups that looked like cases but are invalid
  std::vector<BrokenCase> broken;  // case order
  // Where each tensor of a .pt / .npz / .safetensors case lies, by location_key(); empty for
  // HDF5 (datasets are found by name).
  std::map<std::string, TensorLocation> locations;
};

// "/layer_3" + "query" -> "/layer_3/query": the key of a case's tensor in `locations`.
std::string location_key(const std::string& case_path, const std::string& dataset);

inline constexpr int64_t kHealthUnreadable = -1;

// Encoding version; a reply of another version is refused.
inline constexpr int kListingVersion = 7;

// "listing VERSION BYTES CHECKSUM\n" followed by BYTES bytes of payload. The payload is a
// sequence of tokens: integers as decimal digits and ' ', strings as "LENGTH:" and the bytes,
// doubles as their 64-bit pattern. CHECKSUM is the FNV-1a hash of the payload in hex.
std::string encode_listing(const DumpListing& listing);

// Parses the header line's fields (without "listing "): version, payload size and checksum.
struct ListingHeader {
  int version = 0;
  uint64_t bytes = 0;
  uint64_t checksum = 0;
};
Result<ListingHeader> parse_listing_header(std::string_view fields);

// Decodes a payload checked against `header`. Any inconsistency (size, checksum, truncated
// token, count beyond the bytes left, unknown enum value, trailing bytes) is an Error (io)
// naming `file`; never reads outside `payload`.
Result<DumpListing> decode_listing(const ListingHeader& header, std::string_view payload,
                                   const std::string& file);

uint64_t fnv1a64(std::string_view bytes);

}  // namespace attnscope
