// The bundled sample cases (resources/samples/seed_cases.h5): each reproduces one failure
// users hit in fused attention, plus a healthy case and a multi-step series; and the packed
// sample (resources/samples/packed_sequences.h5).
#pragma once

#include <string>
#include <vector>

#include "core/case_model.h"

namespace attnscope {

struct SampleCase {
  std::string group_path;
  CaseData data;
};

// (a) fp16 score overflow from massive activations, finite in bf16 and fused fp16.
SampleCase make_fp16_score_overflow();
// (b) padding bias of -1e9 in an fp16 run; the last query rows of batch 1 are all padding.
SampleCase make_padding_mask_fp16();
// (c) exploding upstream gradient (||dO|| ~ 1e6 in one head), bf16 run.
SampleCase make_exploding_grad();
// (d) healthy causal case of realistic size with recorded o and lse.
SampleCase make_healthy();
// (f) recorded dq / dk / dv that are finite but wrong (bad columns, 5x norm, cosine -0.1).
SampleCase make_recorded_mismatch();
// (e) 8 steps x 4 layers whose activations grow until the last steps overflow in fp16.
std::vector<SampleCase> make_training_series();
// (g) 4 documents packed in THD with cu_seqlens (fp16): varlen with a NaN in one document's k,
// and SDPA packing whose causal mask is not reset per document (cross_sequence_attention).
std::vector<SampleCase> make_packed_sequences();

}  // namespace attnscope
