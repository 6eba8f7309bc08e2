// Usage text of attnscope-cli (printed by --help, and after a usage error).
#include "cli_usage.h"

namespace attnscope {
namespace {

constexpr const char* kInfo =
    "usage: attnscope-cli info FILE|RUN_FOLDER [--json] [--allow-external]\n"
    "  list the cases of a dump: shapes, dtypes, attributes, recorded outputs; of a run\n"
    "  folder (one dump per rank): its ranks and which ranks recorded each step and layer\n"
    "  exit 1 when groups were rejected as invalid cases\n";

constexpr const char* kScan =
    "usage: attnscope-cli scan FILE[::CASE]|RUN_FOLDER [--json] [--case GLOB] [--shard I/N]\n"
    "         [--precision fp32|fp16|bf16|recorded] [--mode fused|unfused|both]\n"
    "         [--scale X] [--clip NORM] [--clip-scope case|kv-head]\n"
    "         [--mask-fill inf|1e9|min|safe] [--threads N] [--allow-external] [--follow]\n"
    "  recompute every case (or those --case GLOB matches, fnmatch-style, e.g.\n"
    "  '/train/step_00[5-7]/*') with the instrumented CPU kernels and report findings.\n"
    "  --precision recorded (default) uses the case's dtype attribute; --mode replays the\n"
    "  recorded kernel by default (fused for flash / efficient / cuDNN, both when the dump\n"
    "  does not name its backend); --scale overrides the softmax scale; --clip\n"
    "  applies clip_grad_norm_(NORM) to the recomputed gradients; --threads N (default: all\n"
    "  cores) analyses several cases at once, printed in case order as they finish\n"
    "  exit 1 when some finding has error severity; Ctrl-C prints the finished cases and\n"
    "  exits 130. --follow: then wait for the dump to grow (a training run still recording)\n"
    "  and scan each batch of new cases as it lands (a table or JSON document per batch),\n"
    "  printing each new health warning of the recorder's statistics (see health), until\n"
    "  Ctrl-C, which ends it with the exit status of every batch.\n"
    "  RUN_FOLDER: the dumps of a multi-rank run (rank_00000.h5, ...) scanned as one run;\n"
    "  the first bad case names its step, layer, head and rank, and whether the other\n"
    "  ranks have errors in that step too. --shard I/N scans part I (0..N-1) of N\n"
    "  contiguous parts of the cases; `merge` joins the --json reports of every part\n";

constexpr const char* kHealth =
    "usage: attnscope-cli health DUMP|RUN_FOLDER [--json] [--horizon STEPS]\n"
    "  attention health over the recorded steps (attnscope_record's statistics, /health):\n"
    "  per layer and head the max logit against the limit of the kernel's score precision,\n"
    "  entropy, LSE and gradient norms; warnings logit_growth (fitted trend and the predicted\n"
    "  step of crossing the limit), entropy_collapse, gradient_spike, lse_cliff, each with\n"
    "  remedies and the first step it was possible; the first non-finite step\n"
    "  exit 1 when a warning predicts a failure within --horizon STEPS (default 1000) of the\n"
    "  last step, or the limit was already passed; 2 when the dump holds no statistics\n";

constexpr const char* kRepro =
    "usage: attnscope-cli repro FILE::CASE --out DIR [--finding KIND[:TENSOR]] [--backend B]\n"
    "         [--budget SECONDS] [--python PATH] [--no-verify] [--threads N]\n"
    "  a minimal reproducer for an upstream bug report: shrinks the case (batches, whole GQA\n"
    "  groups, query rows, keys; a causal case keeps prefixes) to the smallest part that still\n"
    "  shows the finding as recorded (default: the first error a kernel can be blamed for),\n"
    "  within --budget (default 60 s), and writes DIR/repro.py (plain PyTorch: the recorded\n"
    "  call with the recorded dO against fp64; exit 1 when it reproduces), tensors.safetensors,\n"
    "  case.h5, figure.png and README.md. --backend names the backend repro.py forces when\n"
    "  the dump did not record it. When the recorded kernel runs on this CPU, repro.py is run\n"
    "  with --python (default $ATTNSCOPE_PYTHON, else the venv of scripts/setup.sh when it\n"
    "  exists, else python3) and its result goes into the README; exit 1 when it did not\n"
    "  reproduce, 2 on unreadable input or no such finding\n";

constexpr const char* kMerge =
    "usage: attnscope-cli merge SHARD.json ...\n"
    "  join the reports of `scan --json --shard I/N` (every I of one N, in any order) into\n"
    "  the JSON document the unsharded scan prints, byte for byte; exit status as that\n"
    "  scan's (1 with error findings, 2 with cases skipped as unreadable)\n";

constexpr const char* kCompare =
    "usage: attnscope-cli compare FILE::CASE [--json] [--scale X] [--mask-fill F]\n"
    "  backend matrix: the case through every kernel variant and precision vs fp64\n"
    "  (alias: matrix); exit 1 when a supported run failed or went non-finite\n";

constexpr const char* kSweep =
    "usage: attnscope-cli sweep FILE::CASE [--json] [--scales MIN:MAX:N] [--precision P]\n"
    "         [--mode M] [--mask-fill F] [--forward-only]\n"
    "  softmax-scale sweep (log-spaced): non-finite counts and max |S| per scale and\n"
    "  precision, and the finite range of each; exit 1 when the case's own scale is\n"
    "  non-finite in some series; Ctrl-C exits 130\n";

constexpr const char* kRun =
    "usage: attnscope-cli run FILE[::CASE] --out RESULTS.h5 [--case GLOB] [--precision P]\n"
    "         [--mode fused|unfused] [--scale X] [--mask-fill F] [--threads N]\n"
    "  recompute each case and write a schema-1 dump: the inputs, the attributes, and the\n"
    "  recomputed o, lse, m, dq, dk, dv (fp32) plus a `findings` attribute (JSON) per case\n"
    "  exit 1 when some finding has error severity; Ctrl-C exits 130 and writes nothing\n";

constexpr const char* kStep =
    "usage: attnscope-cli step FILE::CASE [--batch B] [--head H] [--precision P]\n"
    "         [--scale X] [--mask-fill F]\n"
    "  walk the fused backward of one (batch, head) step by step and stop at the first\n"
    "  step that produces a non-finite value: its index, stage, tiles, ranges and values\n"
    "  exit 1 when such a step was found, 0 when the whole backward is finite\n";

constexpr const char* kConvert =
    "usage: attnscope-cli convert IN[::CASE] --out DUMP.h5 [--case GLOB]\n"
    "  rewrite the cases of IN (HDF5, torch.save .pt, numpy .npz, .safetensors) as a\n"
    "  schema-1 HDF5 dump with the same case paths, element types and attributes; the\n"
    "  output is written atomically and never replaces IN\n"
    "  exit 2 when IN cannot be read (or some of its cases were skipped as unreadable)\n";

constexpr const char* kExport =
    "usage: attnscope-cli export FILE[::CASE] --out PATH [--view V] [--format png|pdf|svg]\n"
    "         [--batch B] [--head H] [--precision P] [--mode fused|unfused] [--scale X]\n"
    "         [--mask-fill F] [--clip NORM] [--clip-scope case|kv-head] [--threads N]\n"
    "         [--no-markers] [--no-caption]\n"
    "  figure of one view of one (batch, head), drawn with the GUI's plotting code (offscreen\n"
    "  without a display). V: S (default), P, dP, dS, O, dQ, dK, dV, 'O err', 'dQ err'\n"
    "  (heatmaps) or lse, l, o_norm, dq_norm (row plots). --clip applies clip_grad_norm_(NORM)\n"
    "  over the gradients of the whole case (--clip-scope case, the default, as scan and run)\n"
    "  or of the head's kv group (kv-head) and shows the head's share. Stamped with file, case, "
    "batch/head, precision, mode, scale,\n"
    "  clip and mask fill; heatmaps carry the automatic markers (first non-finite element,\n"
    "  largest |value|) and the annotations saved in the dump's sidecar (FILE.attnscope.json).\n"
    "  The caption under the stamp lists the case's findings under the same run (an analysis\n"
    "  of the whole case; --no-caption leaves it out).\n"
    "  The format follows --format or the suffix of PATH; the file is replaced atomically.\n"
    "  CASE defaults to the first case of the file\n";

constexpr const char* kTop =
    "usage: attnscope-cli <command> [options]   (attnscope-cli <command> --help for more)\n"
    "\n"
    "commands:\n"
    "  info FILE|FOLDER       list the cases of a dump, or the ranks and steps of a run\n"
    "  scan FILE[::CASE]      recompute cases and report findings (also a run FOLDER)\n"
    "  merge SHARD.json ...   join the reports of scan --shard I/N\n"
    "  health DUMP|FOLDER     attention health over a run's steps: warn before the NaN\n"
    "  compare FILE::CASE     backend matrix vs fp64 (alias: matrix)\n"
    "  repro FILE::CASE       minimal reproducer bundle for an upstream bug report\n"
    "  sweep FILE::CASE       softmax-scale sweep\n"
    "  run FILE[::CASE]       recompute and write the results to --out RESULTS.h5\n"
    "  step FILE::CASE        step the fused backward to the first non-finite value\n"
    "  export FILE[::CASE]    stamped, annotated figure of a view (PNG / PDF / SVG)\n"
    "  convert IN --out D.h5  rewrite a .pt / .npz / .safetensors (or HDF5) dump as HDF5\n"
    "\n"
    "FILE is an HDF5 dump, a torch.save .pt, a numpy .npz or a .safetensors file holding a\n"
    "dict of tensors q, k, v, ... (or such dicts per layer). A case is named FILE::/group/path.\n"
    "Exit codes: 0 ok; 1 error-severity findings (scan, run), rejected cases (info), a\n"
    "non-finite or failed supported run (compare), the case's scale non-finite (sweep), a\n"
    "non-finite step (step), a predicted failure (health); 2 unreadable input or bad usage;\n"
    "130 interrupted (Ctrl-C)\n"
    "\n"
    "Every command takes --probe-timeout SECONDS: a dump is first read by a child process\n"
    "(attnscope-probe) so that a crash or hang of a reader on a hostile file cannot take\n"
    "attnscope down; a probe running longer is killed and the file (or case) reported as\n"
    "hanging. Default 120 s, or $ATTNSCOPE_PROBE_TIMEOUT; the option wins\n";

}  // namespace

const char* top_usage() {
  return kTop;
}

const char* command_usage(const std::string& command) {
  if (command == "info") return kInfo;
  if (command == "scan") return kScan;
  if (command == "merge") return kMerge;
  if (command == "health") return kHealth;
  if (command == "repro") return kRepro;
  if (command == "compare" || command == "matrix") return kCompare;
  if (command == "sweep") return kSweep;
  if (command == "run") return kRun;
  if (command == "step") return kStep;
  if (command == "export") return kExport;
  if (command == "convert") return kConvert;
  return nullptr;
}

}  // namespace attnscope
