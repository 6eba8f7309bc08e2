// repro.py of a minimal reproducer (issue 46): plain PyTorch that runs the recorded attention
// call on the bundle's tensors and judges it against fp64, exit 1 when the failure reproduces.
#pragma once

#include <string>

#include "core/analysis/finding.h"

namespace attnscope {

// What repro.py runs: the constants at its top.
struct ReproCall {
  std::string call;     // "eager", "sdpa", "flash_attn" or "xformers"
  std::string backend;  // the recorded backend ("sdpa_flash"; "" when not recorded)
  // repro.py writes the recorded call (false for flex or a model's own attention function:
  // `call` then runs the same semantics)
  bool written = true;
  std::string device;  // the recorded device ("cpu", "cuda:0"; "" when not recorded)
  std::string dtype;   // "float16", ...
  double scale = 1, softcap = 0;
  bool causal = false;
  std::string causal_align = "top_left";
  std::string recorded_torch;
  std::string finding, finding_text;  // kind name and the finding's message
  std::string expect;                 // repro_expectation
  std::string source;                 // "dump.h5::/case"
};

// How repro.py tells the failure from a correct run, for a finding of `kind`: "nonfinite",
// "carried" (nonfinite_input) or "mismatch" (recorded outputs, precision).
const char* repro_expectation(FindingKind kind);

std::string repro_script(const ReproCall& call);

}  // namespace attnscope
