// `attnscope-cli step FILE::CASE [--batch B] [--head H]`: walks the fused backward of one
// (batch, head) with the BackwardStepper and stops at the first step that produces a
// non-finite value, printing the step, its stage, tiles and ranges and values of its output.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "case_format.h"
#include "cli_options.h"
#include "kernels/cpu/backward_stepper.h"

namespace attnscope {
namespace {

constexpr const char* kCommand = "step";

// The buffer the step wrote, with its row width.
std::pair<const std::vector<float>*, int64_t> step_output(const StepperState& s,
                                                          const AttnParams& p) {
  switch (s.step.stage) {
    case StepStage::score_tile:
    case StepStage::mask_tile:
      return {&s.s, s.tile_cols};
    case StepStage::recompute_p:
      return {&s.p, s.tile_cols};
    case StepStage::compute_dp:
      return {&s.dp, s.tile_cols};
    case StepStage::compute_ds:
      return {&s.ds, s.tile_cols};
    case StepStage::accumulate_dv:
      return {&s.dv_acc, p.head_dim_v};
    case StepStage::accumulate_dk:
      return {&s.dk_acc, p.head_dim};
    case StepStage::accumulate_dq:
      return {&s.dq_acc, p.head_dim};
    case StepStage::backward_preprocess:
      return {&s.d, 1};
    case StepStage::store_dk_dv:
      return {&s.dk, p.head_dim};
    case StepStage::store_dq:
      return {&s.dq, p.head_dim};
    case StepStage::start:
      break;
  }
  return {nullptr, 1};
}

// "[r, c] = value" for the first `limit` non-finite entries of the buffer.
void print_values(const std::vector<float>& values, int64_t width, int limit) {
  int shown = 0;
  for (size_t n = 0; n < values.size() && shown < limit; ++n) {
    if (std::isfinite(values[n])) continue;
    std::cout << "    [" << static_cast<int64_t>(n) / width << ", "
              << static_cast<int64_t>(n) % width << "] = " << values[n] << "\n";
    ++shown;
  }
}

std::string tile_text(int64_t tile) {
  return tile < 0 ? "all" : std::to_string(tile);
}

}  // namespace

int run_step(const CommandArgs& args) {
  if (!check_options(args, kCommand, {"batch", "head", "precision", "scale", "mask-fill"})) {
    return kExitUnreadable;
  }
  std::optional<LoadedCase> loaded = load_case_ref(args, kCommand);
  if (!loaded) return kExitUnreadable;
  const CaseData& data = *loaded->data;
  RunChoice run;
  if (!read_run_settings(args, kCommand, run)) return kExitUnreadable;
  const std::optional<int64_t> b = read_index(args, kCommand, "batch", data.info.dims.batch);
  const std::optional<int64_t> h = read_index(args, kCommand, "head", data.info.dims.heads);
  if (!b || !h) return kExitUnreadable;
  Result<CaseInputs> inputs = make_case_inputs(data, run, InputValues::none);
  if (!inputs) return fail(kCommand, inputs.error().message, inputs.error().hint);

  const KernelInputs kin(data);
  const CpuAttnInputs cpu = kin.view();
  const CpuAttnOptions options;
  const AttnParams& params = inputs->params;
  const CpuAttnResult fwd = cpu_attention(params, options, cpu);
  BackwardStepper stepper(params, options, cpu, {fwd.o.data(), fwd.m.data(), fwd.l.data()}, *b, *h);
  const std::string where = loaded->dump->path() + "::" + data.info.path + " batch " +
                            std::to_string(*b) + " head " + std::to_string(*h);
  std::cout << where << ": fused backward at " << precision_name(params.precision) << ", "
            << stepper.size() << " steps\n";
  if (!stepper.run_to_next_nonfinite()) {
    std::cout << "every step finite\n";
    return kExitOk;
  }
  const StepperState& state = stepper.current();
  const StepInfo& s = state.step;
  std::cout << "first non-finite step " << s.index << ": " << step_stage_name(s.stage) << "\n"
            << "  q tile " << tile_text(s.q_tile) << ", kv tile " << tile_text(s.kv_tile)
            << ", rows " << s.window.row_begin << "-" << s.window.row_end - 1 << ", cols "
            << s.window.col_begin << "-" << s.window.col_end - 1 << "\n"
            << "  new non-finite " << s.new_nonfinite << " (nan " << s.nonfinite.nan << ", +inf "
            << s.nonfinite.pos_inf << ", -inf " << s.nonfinite.neg_inf << ")\n";
  const auto [values, width] = step_output(state, params);
  if (values != nullptr) {
    std::cout << "  first non-finite values (row, col within the output):\n";
    print_values(*values, std::max<int64_t>(width, 1), 6);
  }
  return kExitFindings;
}

}  // namespace attnscope
