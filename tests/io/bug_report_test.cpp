// Files written by torch.save, numpy.savez / savez_compressed and safetensors.torch.save_file
// (fixture bug_report_files, tests/io/bug_report_fixture.py) read by DumpReader exactly as
// h5py's reference copy of the same tensors: same case paths and fields, bit-identical
// tensors (non-contiguous views, bfloat16, fp16, Fortran-order arrays, bool masks); through
// the probe too; and the armed pickles are refused without running.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/io/dump_probe.h"
#include "core/io/hdf5_dump.h"
#include "io_test_util.h"

namespace attnscope {
namespace {

using test::open_ok;

std::string fixture(const std::string& name) {
  return std::string(ATTNSCOPE_BUG_REPORTS) + "/" + name;
}

// Every case of `file` equals the case of the same path in `reference` (an h5py file).
void expect_same_as_reference(const DumpReader& dump, const std::string& reference,
                              const std::string& format) {
  EXPECT_EQ(dump.format(), format);
  const DumpReader ref = open_ok(fixture(reference));
  ASSERT_EQ(dump.cases().size(), ref.cases().size());
  EXPECT_TRUE(dump.rejected().empty()) << dump.rejected().front().describe();
  for (size_t i = 0; i < ref.cases().size(); ++i) {
    const CaseInfo& want = ref.cases()[i];
    const CaseInfo& got = dump.cases()[i];
    SCOPED_TRACE(want.path);
    EXPECT_EQ(got.path, want.path);
    EXPECT_EQ(got.config.scale, want.config.scale);
    EXPECT_EQ(got.config.causal, want.config.causal);
    EXPECT_EQ(got.config.layout, want.config.layout);
    ASSERT_EQ(got.tensors.size(), want.tensors.size());
    Result<CaseData> a = ref.load(want.path);
    Result<CaseData> b = dump.load(got.path);
    ASSERT_TRUE(a.ok() && b.ok()) << (b ? "" : b.error().describe());
    for (const auto& [name, tensor] : a->tensors) {
      ASSERT_NE(b->find(name), nullptr) << name;
      test::expect_same_tensor(tensor, *b->find(name), got.path + "/" + name);
    }
  }
}

void expect_same_as_reference(const std::string& file, const std::string& reference,
                              const std::string& format) {
  expect_same_as_reference(open_ok(fixture(file)), reference, format);
}

TEST(BugReport, pt_flat_dict_q_k_v_out_out_grad_is_exact) {
  expect_same_as_reference("flat_fp32.pt", "flat_fp32.ref.h5", "pt");
  const DumpReader dump = open_ok(fixture("flat_fp32.pt"));
  ASSERT_EQ(dump.cases().size(), 1u);
  EXPECT_EQ(dump.cases()[0].path, "/case");
  EXPECT_TRUE(dump.cases()[0].has("o") && dump.cases()[0].has("do"));
  EXPECT_EQ(dump.cases()[0].tensors[3].dataset, "out_grad");
}

TEST(BugReport, pt_protocol4_stack_global_reads_the_same) {
  expect_same_as_reference("flat_proto4.pt", "flat_proto4.ref.h5", "pt");
}

TEST(BugReport, pt_bf16_strided_views_of_packed_qkv_are_exact) {
  expect_same_as_reference("bf16_views.pt", "bf16_views.ref.h5", "pt");
  const DumpReader dump = open_ok(fixture("bf16_views.pt"));
  EXPECT_EQ(dump.cases()[0].tensors[0].dtype, DType::bf16);
  EXPECT_EQ(*dump.cases()[0].config.scale, 0.375);  // a 0-d tensor
}

TEST(BugReport, pt_query_key_value_float_attn_mask_is_a_bias) {
  expect_same_as_reference("query_key_value_mask.pt", "query_key_value_mask.ref.h5", "pt");
  const DumpReader dump = open_ok(fixture("query_key_value_mask.pt"));
  EXPECT_TRUE(dump.cases()[0].has("bias"));
  EXPECT_EQ(dump.cases()[0].find("bias")->dataset, "attn_mask");
}

TEST(BugReport, pt_nested_layers_are_cases_in_numeric_order_with_file_level_fields) {
  expect_same_as_reference("nested_layers.pt", "nested_layers.ref.h5", "pt");
  const DumpReader dump = open_ok(fixture("nested_layers.pt"));
  EXPECT_EQ(dump.cases()[0].path, "/step_3/layer_2");
  EXPECT_EQ(dump.cases()[1].path, "/step_3/layer_10");
}

TEST(BugReport, pt_list_of_dicts_gives_a_case_per_index) {
  expect_same_as_reference("list_of_dicts.pt", "list_of_dicts.ref.h5", "pt");
}

TEST(BugReport, npz_savez_with_fortran_order_and_0d_scale_is_exact) {
  expect_same_as_reference("sdpa.npz", "sdpa.ref.h5", "npz");
}

TEST(BugReport, npz_savez_compressed_per_layer_is_exact) {
  expect_same_as_reference("sdpa_compressed.npz", "sdpa_compressed.ref.h5", "npz");
}

TEST(BugReport, safetensors_bf16_with_metadata_is_exact) {
  expect_same_as_reference("sdpa_st.safetensors", "sdpa_st.ref.h5", "safetensors");
}

TEST(BugReport, probe_listing_carries_tensor_locations) {
  ProbeOptions probe;
  probe.executable = ATTNSCOPE_PROBE_EXE;
  for (const char* name : {"bf16_views.pt", "sdpa_compressed.npz", "sdpa_st.safetensors"}) {
    SCOPED_TRACE(name);
    Result<ProbeOutcome> probed = probe_dump(fixture(name), probe);
    ASSERT_TRUE(probed.ok()) << probed.error().describe();
    ASSERT_TRUE(probed->listing.has_value());
    EXPECT_FALSE(probed->listing->locations.empty());
    Result<DumpReader> dump = open_untrusted_dump(fixture(name), probe);
    ASSERT_TRUE(dump.ok()) << dump.error().describe();
    EXPECT_EQ(dump->listing().locations, open_ok(fixture(name)).listing().locations);
  }
  expect_same_as_reference(*open_untrusted_dump(fixture("bf16_views.pt"), probe),
                           "bf16_views.ref.h5", "pt");
}

TEST(BugReport, uint16_tensor_of_rebuild_tensor_v3_is_refused_as_a_type_not_as_code) {
  Result<DumpReader> dump = DumpReader::open(fixture("uint16_q.pt"));
  ASSERT_FALSE(dump.ok());
  EXPECT_NE(dump.error().message.find("element type torch saves with _rebuild_tensor_v3"),
            std::string::npos)
      << dump.error().message;
  EXPECT_EQ(dump.error().hint.find("do not torch.load"), std::string::npos) << dump.error().hint;
  EXPECT_NE(dump.error().hint.find("the file itself is harmless"), std::string::npos);
}

TEST(BugReport, armed_pickles_are_refused_naming_the_global_and_never_run) {
  for (const char* name : {"armed_os_system", "armed_stack_global"}) {
    SCOPED_TRACE(name);
    Result<DumpReader> dump = DumpReader::open(fixture(std::string(name) + ".pt"));
    ASSERT_FALSE(dump.ok());
    EXPECT_EQ(dump.error().code, ErrorCode::unsupported);
    EXPECT_NE(dump.error().message.find("refuses the global 'posix.system'"), std::string::npos)
        << dump.error().message;
    EXPECT_NE(dump.error().hint.find("do not torch.load it"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(fixture(std::string("pwned_") + name)));
  }
}

}  // namespace
}  // namespace attnscope
