// Packed sequences (THD + cu_seqlens, fixture packed_files: tests/io/packed_fixture.py): each
// sequence of a file written by torch.save, numpy.savez, safetensors or h5py opens as its own
// case, bit-identical to the same sequence cut by h5py into a BHSD case; through the probe too.
// A leaking block-diagonal mask of SDPA packing (one batch row [1, H, T, D]) is counted per
// sequence; invalid starts reject the group with the reason.
#include <gtest/gtest.h>

#include <string>

#include "core/io/dump_probe.h"
#include "core/io/hdf5_dump.h"
#include "io_test_util.h"

namespace attnscope {
namespace {

using test::open_ok;

std::string fixture(const std::string& name) {
  return std::string(ATTNSCOPE_PACKED) + "/" + name;
}

// Each sequence case of `dump` equals the BHSD case of the same path in `reference`.
void expect_sequences_equal(const DumpReader& dump, const std::string& reference) {
  const DumpReader ref = open_ok(fixture(reference));
  ASSERT_EQ(dump.cases().size(), 3u);
  ASSERT_EQ(ref.cases().size(), 3u);
  const int64_t q_starts[] = {0, 5, 12, 16}, k_starts[] = {0, 6, 15, 20};
  for (size_t i = 0; i < 3; ++i) {
    const CaseInfo& got = dump.cases()[i];
    SCOPED_TRACE(got.path);
    EXPECT_EQ(got.path, ref.cases()[i].path);
    EXPECT_EQ(got.config.layout, Layout::thd);
    EXPECT_EQ(got.config.causal, ref.cases()[i].config.causal);
    EXPECT_EQ(got.config.causal_align, ref.cases()[i].config.causal_align);
    ASSERT_TRUE(got.packed.has_value());
    EXPECT_EQ(got.packed->group, "/layer_0");
    EXPECT_EQ(got.packed->index, static_cast<int64_t>(i));
    EXPECT_EQ(got.packed->count, 3);
    EXPECT_EQ(got.packed->q_begin, q_starts[i]);
    EXPECT_EQ(got.packed->q_end, q_starts[i + 1]);
    EXPECT_EQ(got.packed->k_begin, k_starts[i]);
    EXPECT_EQ(got.packed->k_end, k_starts[i + 1]);
    EXPECT_EQ(got.dims.seqlen_q, q_starts[i + 1] - q_starts[i]);
    EXPECT_EQ(got.dims.seqlen_k, k_starts[i + 1] - k_starts[i]);
    EXPECT_EQ(got.dims.kv_heads, 2);
    EXPECT_FALSE(got.has("cu_seqlens_q"));
    Result<CaseData> a = ref.load(got.path);
    Result<CaseData> b = dump.load(got.path);
    ASSERT_TRUE(a.ok() && b.ok()) << (b ? "" : b.error().describe());
    ASSERT_EQ(a->tensors.size(), b->tensors.size());
    EXPECT_EQ(a->tensors.size(), 9u);  // q k v o lse do dq dk dv
    for (const auto& [name, tensor] : a->tensors) {
      ASSERT_NE(b->find(name), nullptr) << name;
      test::expect_same_tensor(tensor, *b->find(name), got.path + "/" + name);
    }
    EXPECT_FALSE(b->leak.has_value());
  }
}

TEST(PackedSequence, pt_bf16_sequences_equal_their_cut_reference) {
  expect_sequences_equal(open_ok(fixture("packed.pt")), "packed_pt.ref.h5");
}

TEST(PackedSequence, npz_int64_starts_sequences_equal_their_cut_reference) {
  expect_sequences_equal(open_ok(fixture("packed.npz")), "packed_npz.ref.h5");
}

TEST(PackedSequence, safetensors_fp16_sequences_equal_their_cut_reference) {
  expect_sequences_equal(open_ok(fixture("packed.safetensors")), "packed_safetensors.ref.h5");
}

TEST(PackedSequence, hdf5_thd_sequences_equal_their_cut_reference) {
  expect_sequences_equal(open_ok(fixture("packed.h5")), "packed_h5.ref.h5");
}

TEST(PackedSequence, probe_lists_the_sequences_and_checks_each_group_once) {
  ProbeOptions probe;
  probe.executable = ATTNSCOPE_PROBE_EXE;
  for (const char* name : {"packed.pt", "packed.h5"}) {
    SCOPED_TRACE(name);
    Result<DumpReader> dump = open_untrusted_dump(fixture(name), probe);
    ASSERT_TRUE(dump.ok()) << dump.error().describe();
    EXPECT_TRUE(dump->broken().empty());
    const std::string reference =
        std::string(name) == "packed.pt" ? "packed_pt.ref.h5" : "packed_h5.ref.h5";
    expect_sequences_equal(*dump, reference);
    const DumpReader direct = open_ok(fixture(name));
    for (size_t i = 0; i < direct.cases().size(); ++i) {
      EXPECT_EQ(dump->cases()[i].packed, direct.cases()[i].packed);
    }
  }
}

TEST(PackedSequence, leaking_block_mask_is_counted_in_the_sequence_that_leaks) {
  const DumpReader dump = open_ok(fixture("packed_leaky_mask.h5"));
  ASSERT_EQ(dump.cases().size(), 3u);
  for (const CaseInfo& info : dump.cases()) {
    SCOPED_TRACE(info.path);
    EXPECT_EQ(info.config.layout, Layout::bhsd);  // SDPA packing: one batch row
    Result<CaseData> data = dump.load(info.path);
    ASSERT_TRUE(data.ok()) << data.error().describe();
    const HostTensor& mask = data->tensors.at("mask");
    EXPECT_EQ(mask.shape, (std::vector<int64_t>{1, 1, info.dims.seqlen_q, info.dims.seqlen_k}));
    if (info.packed->index != 1) {
      EXPECT_FALSE(data->leak.has_value());
      continue;
    }
    ASSERT_TRUE(data->leak.has_value());
    EXPECT_EQ(data->leak->tensor, "mask");
    EXPECT_EQ(data->leak->rows, 1);
    EXPECT_EQ(data->leak->entries, 1);
    EXPECT_EQ(data->leak->first_row, 2);
    EXPECT_EQ(data->leak->first_key, 1);
    // The cut mask is the sequence's own causal block: row 2 sees keys 0-2 of sequence 1.
    EXPECT_EQ(mask.to_mask(),
              (std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0,
                                    1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1}));
  }
}

TEST(PackedSequence, invalid_starts_reject_the_group_naming_the_problem) {
  const std::pair<const char*, const char*> cases[] = {
      {"packed_bad_decreasing.h5", "/layer_0/cu_seqlens_q: decreases at entry 2 (9 -> 4)"},
      {"packed_bad_beyond.h5", "/layer_0/cu_seqlens_q: ends at 16, beyond the 15 tokens of q"},
      {"packed_bad_no_keys.h5", "/layer_0/cu_seqlens_k: sequence 1 has 6 queries and no keys"},
      {"packed_bad_no_k_starts.h5",
       "/layer_0: cu_seqlens_k is missing, and k holds 12 tokens where q holds 15"},
      {"packed_bad_two_rows.h5",
       "/layer_0/cu_seqlens_q: sequence starts need packed tensors: q [T,H,D] (layout THD) or "
       "one batch row [1,H,T,D] / [1,T,H,D], not BHSD [2, 4, 15, 8]"},
  };
  for (const auto& [file, message] : cases) {
    SCOPED_TRACE(file);
    Result<DumpReader> dump = DumpReader::open(fixture(file));
    ASSERT_FALSE(dump.ok());
    EXPECT_EQ(dump.error().code, ErrorCode::format);
    EXPECT_NE(dump.error().message.find(fixture(file) + ": " + message), std::string::npos)
        << dump.error().message;
    if (std::string(file) != "packed_bad_two_rows.h5") {
      EXPECT_NE(dump.error().hint.find("N+1 sequence starts"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace attnscope
