// GroupBaseline: the accuracy rule's baseline (the unfused kernel at the recorded precision) run
// a round of (batch, kv group)s at a time as the fp64 reference streams, instead of whole before.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/case_model.h"
#include "core/value_reader.h"
#include "kernels/attn_params.h"
#include "kernels/cpu/fused_attention.h"

namespace attnscope {

// The unfused kernel run on the query heads of a round of (batch, kv group)s at a time (one
// call per batch the round touches): its inputs converted from the case for the call, its
// outputs held until the next round. The unfused kernel computes every group on its own (no sum
// runs across groups, and its sums keep their order whatever the split over workers), so a
// group's values are the bits of the whole run's. Besides the current round, it gathers what is
// compared whole at the end: lse [B, H, Sq], and a gradient of an input broadcast over the batch
// (CaseDims::batch_summed) summed over the batch in batch order, as batch_sum_of reads it.
class GroupBaseline {
 public:
  // `params` is the run's (its precision the recorded one); `data` and `params` outlive this.
  // Without `gradients` only the forward runs (o and lse).
  GroupBaseline(const CaseData& data, const AttnParams& params, bool gradients, int threads);
  // Runs groups b * Hk + g in [first, last); rounds come in stream_reference64's order.
  void run(int64_t first, int64_t last);
  // Output `name` ("o", "lse", "dq", "dk", "dv") by its flat index in the whole tensor: o, dq,
  // dk, dv within the current round's heads (std::out_of_range elsewhere); lse and the
  // batch-summed gradients (flat in their [1, ...] shape) once every round ran.
  ValueReader reader(const std::string& name) const;

 private:
  // The outputs of groups [first, first + count) of one batch: o, lse, dq of their query heads,
  // dk, dv of their kv heads, in the whole tensors' order.
  struct Piece {
    int64_t first = 0, count = 0;
    CpuAttnResult out;
  };
  void run_piece(int64_t b, int64_t g0, int64_t g1);

  const CaseData& data_;
  const AttnParams& p_;
  const bool gradients_;
  const int threads_;
  std::vector<Piece> round_;
  std::vector<float> lse_;  // [B, H, Sq], gathered
  // dq [H, Sq, D], dk [Hk, Sk, D], dv [Hk, Sk, Dv] summed over the batch, for those that are
  // batch-summed (else empty).
  std::vector<double> dq_sum_, dk_sum_, dv_sum_;
};

}  // namespace attnscope
