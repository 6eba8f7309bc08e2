// The probe's case listing encoding (core/io/dump_listing.h): an exact round trip of every
// field (odd bytes in names, NaN and negative zero doubles, absent optionals), and malformed
// replies (wrong version, size, checksum, truncated tokens, counts beyond the bytes, bad enum
// values, trailing bytes) refused as errors naming the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/io/dump_listing.h"

namespace attnscope {
namespace {

CaseInfo sample_case(const std::string& path) {
  CaseInfo c;
  c.path = path;
  c.config.scale = -0.0;
  c.config.causal = true;
  c.config.causal_align = CausalAlign::bottom_right;
  c.config.dtype = "bfloat16";
  c.config.layout = Layout::bshd;
  c.config.softcap = std::numeric_limits<double>::quiet_NaN();
  c.config.step = -7;
  c.config.name = std::string("a\nb c:12 \0x", 11);
  c.config.description = "";
  c.dims = {2, 8, 2, 97, 1025, 59, 111, true, false};
  c.tensors.push_back({"q", "q", DType::bf16, {2, 97, 8, 59}});
  c.tensors.push_back({"do", "grad_out", DType::f16, {2, 97, 8, 111}});
  c.tensors.push_back({"mask", "mask", DType::boolean, {}});
  c.config.run.library_version = "2.7.4";
  c.config.run.score_mod = "def soft(score, b, h, q, kv):\n    return score * 2\n";
  c.config.run.score_mod_replay = "unavailable";
  c.config.run.score_mod_note = "not a softcap or an additive bias";
  c.packed = PackedSequence{"/step 1", 2, 4, 52, 100, 50, 97, 112, 113};
  return c;
}

DumpListing sample_listing() {
  DumpListing listing;
  listing.format = "pt";
  listing.schema_version = 1;
  listing.rank = {3, 8, 1, "node 7"};
  listing.cases.push_back(sample_case("/step 1/layer:0"));
  CaseInfo plain;
  plain.path = "/x";
  listing.cases.push_back(plain);
  listing.rejected.push_back(make_error(ErrorCode::unsupported, "f.h5: /g: external", "allow"));
  listing.broken.push_back({sample_case("/broken"), make_error(ErrorCode::format, "crash", "")});
  listing.locations["/step 1/layer:0/q"] = {"archive/data/3", 128, {96, 0, 32, 1}, true};
  listing.locations["/plain/k"] = {"", 8, {}, false};
  return listing;
}

// The header fields and payload of an encoded listing.
std::pair<std::string, std::string> split(const std::string& encoded) {
  const size_t newline = encoded.find('\n');
  return {encoded.substr(std::strlen("listing "), newline - std::strlen("listing ")),
          encoded.substr(newline + 1)};
}

Result<DumpListing> decode(const std::string& header_fields, const std::string& payload) {
  Result<ListingHeader> header = parse_listing_header(header_fields);
  if (!header) return header.error();
  return decode_listing(*header, payload, "f.h5");
}

// Re-encodes a modified payload with a matching header (so only the payload is wrong).
Result<DumpListing> decode_payload(const std::string& payload) {
  char fields[64];
  std::snprintf(fields, sizeof fields, "%d %zu %016llx", kListingVersion, payload.size(),
                static_cast<unsigned long long>(fnv1a64(payload)));
  return decode(fields, payload);
}

TEST(Listing, round_trip_keeps_every_field) {
  const DumpListing in = sample_listing();
  const auto [fields, payload] = split(encode_listing(in));
  const Result<DumpListing> out = decode(fields, payload);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->schema_version, 1);
  EXPECT_EQ(out->rank.rank, 3);
  EXPECT_EQ(out->rank.world_size, 8);
  EXPECT_EQ(out->rank.local_rank, 1);
  EXPECT_EQ(out->rank.host, "node 7");
  ASSERT_EQ(out->cases.size(), 2u);
  const CaseInfo& c = out->cases[0];
  EXPECT_EQ(c.path, "/step 1/layer:0");
  ASSERT_TRUE(c.config.scale);
  EXPECT_TRUE(std::signbit(*c.config.scale));
  EXPECT_EQ(*c.config.scale, 0.0);
  EXPECT_TRUE(c.config.causal);
  EXPECT_EQ(c.config.causal_align, CausalAlign::bottom_right);
  EXPECT_EQ(c.config.dtype, "bfloat16");
  EXPECT_EQ(c.config.layout, Layout::bshd);
  EXPECT_TRUE(std::isnan(c.config.softcap));
  EXPECT_EQ(c.config.step, std::optional<int64_t>(-7));
  EXPECT_FALSE(c.config.layer);
  EXPECT_EQ(c.config.name, std::string("a\nb c:12 \0x", 11));
  EXPECT_EQ(c.dims.seqlen_k, 1025);
  EXPECT_EQ(c.dims.head_dim_v, 111);
  EXPECT_TRUE(c.dims.q_broadcast);
  EXPECT_FALSE(c.dims.kv_broadcast);
  ASSERT_EQ(c.tensors.size(), 3u);
  EXPECT_EQ(c.tensors[1].dataset, "grad_out");
  EXPECT_EQ(c.tensors[1].dtype, DType::f16);
  EXPECT_EQ(c.tensors[1].shape, (std::vector<int64_t>{2, 97, 8, 111}));
  EXPECT_TRUE(c.tensors[2].shape.empty());
  EXPECT_EQ(c.config.run.library_version, "2.7.4");
  EXPECT_EQ(c.config.run.score_mod, "def soft(score, b, h, q, kv):\n    return score * 2\n");
  EXPECT_EQ(c.config.run.score_mod_replay, "unavailable");
  EXPECT_EQ(c.config.run.score_mod_note, "not a softcap or an additive bias");
  EXPECT_EQ(c.packed, (PackedSequence{"/step 1", 2, 4, 52, 100, 50, 97, 112, 113}));
  EXPECT_FALSE(out->cases[1].packed);
  EXPECT_FALSE(out->cases[1].config.scale);
  ASSERT_EQ(out->rejected.size(), 1u);
  EXPECT_EQ(out->rejected[0].code, ErrorCode::unsupported);
  EXPECT_EQ(out->rejected[0].hint, "allow");
  ASSERT_EQ(out->broken.size(), 1u);
  EXPECT_EQ(out->broken[0].info.path, "/broken");
  EXPECT_EQ(out->broken[0].error.message, "crash");
  EXPECT_EQ(out->format, "pt");
  EXPECT_EQ(out->locations, in.locations);
}

TEST(Listing, header_version_size_and_checksum_are_checked) {
  const auto [fields, payload] = split(encode_listing(sample_listing()));
  const std::string size = std::to_string(payload.size());
  const std::string sum = fields.substr(fields.rfind(' ') + 1);
  const std::string next = std::to_string(kListingVersion + 1);
  const Result<DumpListing> version = decode(next + " " + size + " " + sum, payload);
  ASSERT_FALSE(version.ok());
  EXPECT_NE(
      version.error().message.find("f.h5: attnscope's probe process gave a malformed case "
                                   "listing (version " +
                                   next + ", expected " + std::to_string(kListingVersion) + ")"),
      std::string::npos)
      << version.error().message;
  const Result<DumpListing> cut = decode(fields, payload.substr(0, payload.size() - 1));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message.find("bytes"), std::string::npos) << cut.error().message;
  std::string flipped = payload;
  flipped[flipped.size() / 2] ^= 1;
  const Result<DumpListing> corrupt = decode(fields, flipped);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.error().message.find("checksum mismatch"), std::string::npos);
  EXPECT_FALSE(decode("1 x 00", payload).ok());
  EXPECT_FALSE(decode("1 99999999999 00", payload).ok());  // beyond the payload limit
}

TEST(Listing, malformed_payloads_are_errors) {
  const std::string payload = split(encode_listing(sample_listing())).second;
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    const Result<DumpListing> out = decode_payload(payload.substr(0, cut));
    ASSERT_FALSE(out.ok()) << "cut at " << cut;
    EXPECT_NE(out.error().message.find("truncated or invalid token"), std::string::npos);
  }
  EXPECT_FALSE(decode_payload(payload + "0 ").ok());                       // trailing bytes
  EXPECT_FALSE(decode_payload("0:1 -1 -1 -1 0:0 999999999 ").ok());        // more cases than bytes
  EXPECT_FALSE(decode_payload("0:1 -1 -1 -1 0:0 1 2:/x0 0 0 0:9 ").ok());  // layout 9 out of range
  EXPECT_FALSE(decode_payload("0:1 -1 -1 -1 0:0 0 1 7 0:0:0 ").ok());  // error code 7 out of range
  EXPECT_FALSE(decode_payload("0:1 -1 -1 -1 0:0 0 0 -1 ").ok());       // negative count
  EXPECT_FALSE(decode_payload("0:0 -1 -1 -1 0:0 0 0 0 1 1:k0:0 2 0 ").ok());  // byte order flag 2
  EXPECT_TRUE(decode_payload("0:0 -1 -1 -1 0:0 0 0 0 0 ").ok());              // an empty listing
}

}  // namespace
}  // namespace attnscope
