// One attention layer of a training step recorded with LibTorch, as attnscope_record writes it
// (issue 43's scale benchmark, without Python): SDPA forward + backward of random q, k, v, dO on
// the CPU in bf16 (causal, GQA), the user's own step timed, and the case it makes: the inputs,
// the recorded o, dq, dk, dv and the recorder's run attributes (backend, torch version, dtype).
#pragma once

#include <cstdint>

#include "core/case_model.h"
#include "core/result.h"

namespace attnscope {

struct LayerShape {
  int64_t batch = 1, heads = 32, kv_heads = 8, seqlen = 4096, head_dim = 128;
};

struct RecordedLayer {
  CaseData data;            // what a scan of the recorder's dump reads
  double step_seconds = 0;  // median of the timed forward + backward runs
  double step_min_seconds = 0;
};

// `reps` (>= 1) timed forward + backward runs after one untimed, on `threads` LibTorch threads
// (0: LibTorch's default); the case holds the last run's tensors.
Result<RecordedLayer> record_torch_layer(const LayerShape& shape, int threads, int reps);

}  // namespace attnscope
