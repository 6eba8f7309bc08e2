// The shared kernel vocabulary of kernels/attn_types.h and kernels/attn_names.h: the row-cause
// rule both kernels resolve provenance with, the class of a pooled block, element counts, and
// the names reports and session files carry.
#include <gtest/gtest.h>

#include <string>

#include "kernels/attn_names.h"
#include "kernels/attn_types.h"

namespace attnscope {
namespace {

TEST(AttnTypes, row_provenance_takes_the_earliest_cause) {
  const Provenance fb = Provenance::propagated;
  EXPECT_EQ(row_provenance(kCauseExpOverflow, true, false, fb), Provenance::input);
  EXPECT_EQ(row_provenance(kCauseInput | kCauseScoreOverflow, false, false, fb), Provenance::input);
  EXPECT_EQ(row_provenance(kCauseScoreOverflow | kCauseGradOverflow, false, false, fb),
            Provenance::score_overflow);
  EXPECT_EQ(row_provenance(0, false, true, fb), Provenance::fully_masked_row);
  EXPECT_EQ(row_provenance(kCauseFillMasked, false, true, fb), Provenance::mask_fill);
  EXPECT_EQ(row_provenance(kCauseScoreNegInf | kCauseFillMasked, false, true, fb),
            Provenance::score_overflow);
  EXPECT_EQ(row_provenance(kCauseExpOverflow | kCauseGradOverflow, false, false, fb),
            Provenance::exp_overflow);
  EXPECT_EQ(row_provenance(kCauseGradOverflow, false, false, fb), Provenance::grad_overflow);
  EXPECT_EQ(row_provenance(kCauseFillMasked, false, false, Provenance::lse), Provenance::lse);
}

TEST(AttnTypes, block_class_is_its_worst_entry_else_masked_without_finite) {
  EXPECT_EQ(cell_class(1, 1, 1, 5), CellClass::nan);
  EXPECT_EQ(cell_class(0, 2, 1, 5), CellClass::pos_inf);
  EXPECT_EQ(cell_class(0, 0, 1, 5), CellClass::neg_inf);
  EXPECT_EQ(cell_class(0, 0, 0, 0), CellClass::masked);
  EXPECT_EQ(cell_class(0, 0, 0, 3), CellClass::finite);
}

TEST(AttnTypes, cell_counts_add_by_class_and_sum) {
  CellCounts c;
  c.add(CellClass::nan, 2);
  c.add(CellClass::neg_inf);
  c.add(CellClass::masked, 4);
  c.add(CellClass::finite, 7);
  CellCounts d;
  d.add(CellClass::pos_inf, 3);
  c += d;
  EXPECT_EQ(c.nonfinite(), 6);
  EXPECT_EQ(c.masked, 4);
  EXPECT_EQ(c.finite, 7);
}

TEST(AttnNames, every_enumerator_has_its_fixed_name) {
  EXPECT_STREQ(precision_name(Precision::f16), "fp16");
  EXPECT_STREQ(mask_fill_name(MaskFill::finfo_min), "finfo_min");
  EXPECT_STREQ(causal_align_name(CausalAlign::bottom_right), "bottom_right");
  EXPECT_STREQ(backward_p_name(BackwardP::saved), "saved");
  EXPECT_STREQ(mode_name(Mode::fused), "fused");
  EXPECT_STREQ(cell_class_name(CellClass::pos_inf), "+inf");
  EXPECT_STREQ(step_stage_name(StepStage::store_dq), "backward_postprocess");
  for (int c = 0; c < kProvenanceCodes; ++c) {
    EXPECT_NE(std::string(provenance_name(static_cast<Provenance>(c))), "unknown") << c;
  }
  EXPECT_STREQ(provenance_name(Provenance::fully_masked_row), "fully_masked_row");
}

}  // namespace
}  // namespace attnscope
