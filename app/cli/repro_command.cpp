// `attnscope-cli repro FILE::CASE --out DIR`: shrinks a case to the smallest part that still
// shows a finding (core/analysis/shrink.h) and writes an upstream bug report's bundle: repro.py
// (plain PyTorch), tensors.safetensors, case.h5 (the minimal case for attnscope), figure.png
// (the export of its heatmap) and README.md; then runs repro.py here when the recorded kernel
// runs on this machine.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "case_format.h"  // dims_text
#include "child_process.h"
#include "cli_common.h"
#include "cli_options.h"
#include "core/analysis/finding_text.h"
#include "core/analysis/shrink.h"
#include "core/io/atomic_file.h"
#include "core/io/hdf5_dump.h"
#include "core/io/safetensors_writer.h"
#include "core/replay.h"
#include "repro_script.h"

namespace attnscope {
namespace {

namespace fs = std::filesystem;
constexpr const char* kCommand = "repro";
constexpr double kVerifySeconds = 300;

// --finding KIND or KIND:TENSOR.
std::optional<std::pair<FindingKind, std::string>> parse_finding(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  for (FindingKind k : kAllFindingKinds) {
    if (kind == finding_kind_name(k)) {
      return std::make_pair(k, colon == std::string::npos ? "" : text.substr(colon + 1));
    }
  }
  return std::nullopt;
}

// A finding that only reports non-finite values (in the inputs, or passed on from a cause
// another finding names).
bool consequence(FindingKind k) {
  return k == FindingKind::nonfinite_input || k == FindingKind::nonfinite_output ||
         k == FindingKind::nonfinite_gradient || k == FindingKind::clip_spreads_nan;
}

// The finding to reproduce: the first error (the list is worst first) that names what the
// kernel did wrong (an overflow, a leak, a mismatch), else the first error a kernel can be
// blamed for at all, else the first such warning.
const Finding* default_target(const std::vector<Finding>& findings) {
  for (Severity s : {Severity::error, Severity::warning}) {
    for (bool causes : {true, false}) {
      for (const Finding& f : findings) {
        if (f.severity == s && !f.what_if && reproducible_kind(f.kind) &&
            (!causes || !consequence(f.kind))) {
          return &f;
        }
      }
    }
  }
  return nullptr;
}

bool has_mode(const Finding& f, const char* mode) {
  return std::find(f.modes.begin(), f.modes.end(), mode) != f.modes.end();
}

// The API family of a recorded backend that repro.py writes the call of; empty for the others
// (flex, a model's own attention function).
std::string written_call(const std::string& backend) {
  if (backend.rfind("sdpa", 0) == 0) return "sdpa";
  if (backend.rfind("flash_attn", 0) == 0) return "flash_attn";
  if (backend.rfind("xformers", 0) == 0) return "xformers";
  if (backend == "eager") return "eager";
  return {};
}

// Whether repro.py runs the recorded kernel itself on this machine (a CPU).
bool runs_here(const ReproCall& c) {
  if (!c.written || (!c.device.empty() && c.device.rfind("cpu", 0) != 0)) return false;
  return c.call == "eager" ||
         (c.call == "sdpa" && (c.backend.empty() || c.backend == "sdpa" ||
                               c.backend == "sdpa_math" || c.backend == "sdpa_flash"));
}

// "0-3, 7" of increasing indices.
std::string indices_text(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(v[i]) + (j > i ? "-" + std::to_string(v[j]) : "");
    i = j + 1;
  }
  return out;
}

Status write_text(const fs::path& path, const std::string& text) {
  Result<AtomicFile> file = AtomicFile::create(path.string());
  if (!file) return file.error();
  std::ofstream(file->temp_path(), std::ios::binary) << text;
  return file->commit();
}

// tensors.safetensors: the inputs under their schema names, recorded outputs as recorded_NAME.
Status write_tensors(const fs::path& path, const CaseData& c, const ReproCall& call) {
  std::vector<NamedTensor> list;
  for (const auto& [name, t] : c.tensors) {
    const bool input = name == "q" || name == "k" || name == "v" || name == "do" ||
                       name == "mask" || name == "bias" || name == "dropout_mask";
    list.push_back({input ? name : "recorded_" + name, &t});
  }
  return write_safetensors(path.string(), list,
                           {{"source", call.source},
                            {"finding", call.finding},
                            {"layout", "BHSD"},
                            {"writer", "attnscope-cli repro"}});
}

Status write_case_h5(const fs::path& path, const CaseData& c) {
  Result<DumpWriter> w = DumpWriter::create(path.string());
  if (!w) return w.error();
  if (Status s = w->write_case("/case", c); !s) return s;
  return w->close();
}

std::string tensor_list(const CaseData& c) {
  std::string out;
  for (const auto& [name, t] : c.tensors) {
    out += (out.empty() ? "" : ", ") + name + " " + t.shape_string() + " " + dtype_name(t.dtype);
  }
  return out;
}

std::string readme(const ReproCall& call, const CaseData& original, const ShrinkResult& r,
                   const std::string& command, const std::string& figure,
                   const std::string& verified) {
  const RunRecord& run = original.info.config.run;
  const double share = 100.0 * static_cast<double>(r.minimal_elements) /
                       static_cast<double>(std::max<int64_t>(r.original_elements, 1));
  std::ostringstream s;
  s << "# " << call.finding << " in " << (call.backend.empty() ? call.call : call.backend) << " ("
    << call.dtype << ")\n\n"
    << "Minimal reproducer written by `" << command << "` from `" << call.source << "`.\n\n"
    << "## What breaks\n\n"
    << r.finding.message << "\n\n";
  if (call.expect == "nonfinite") {
    s << "Expected: o, dq, dk and dv finite wherever an fp64 computation of the same inputs "
         "is finite.\nObserved (attnscope's replay of the recorded run): non-finite values "
         "there.\n\n";
  } else if (call.expect == "carried") {
    s << "The inputs hold non-finite values and the outputs carry them.\n\n";
  } else {
    s << "Expected: o and the gradients within the dtype's accuracy of an fp64 computation of "
         "the same inputs.\nObserved: errors beyond it.\n\n";
  }
  s << "## Environment (as recorded)\n\n"
    << "- torch: " << (run.torch_version.empty() ? "not recorded" : run.torch_version) << "\n"
    << "- backend: " << (run.backend.empty() ? "not recorded" : run.backend);
  if (!run.library_version.empty()) s << " (library " << run.library_version << ")";
  s << "\n- device: " << (run.device.empty() ? "not recorded" : run.device) << "\n"
    << "- dtype: " << call.dtype
    << (run.autocast_dtype.empty() ? "" : " (autocast " + run.autocast_dtype + ")") << "\n"
    << "- softmax scale " << num(call.scale) << ", causal " << (call.causal ? "yes" : "no")
    << (call.causal ? " (" + call.causal_align + ")" : "")
    << (call.softcap != 0 ? ", softcap " + num(call.softcap) : "") << "\n"
    << "- repro.py calls: " << call.call
    << (call.backend.rfind("sdpa_", 0) == 0 ? " with the " + call.backend + " backend forced"
                                            : std::string())
    << "\n";
  if (!call.written) {
    s << "- the recorded " << call.backend << " call is not written out: repro.py runs "
      << call.call << " with the same semantics (scale, mask, causal, softcap as recorded)";
    if (!run.score_mod.empty())
      s << "; the recorded score_mod was:\n\n```python\n" << run.score_mod << "\n```";
    s << "\n";
  }
  if (run.dropout_p > 0) {
    s << "- the run had attention dropout p = " << num(run.dropout_p)
      << ", which repro.py does not apply\n";
  }
  s << "\n## Minimal case\n\n"
    << "Shrunk from " << dims_text(original.info.dims) << " (" << count_text(r.original_elements)
    << " elements) to " << dims_text(r.minimal.info.dims) << " (" << count_text(r.minimal_elements)
    << " elements, " << num(share) << " %) in " << r.tries << " analyses"
    << (r.budget_spent ? " (the time budget ran out: smaller may exist)" : "") << ".\nKept: batch "
    << indices_text(r.kept.batches) << ", kv head(s) " << indices_text(r.kept.kv_heads)
    << ", query rows " << indices_text(r.kept.rows) << ", keys " << indices_text(r.kept.keys)
    << " of the original.\n";
  for (const std::string& note : r.notes) s << "- " << note << "\n";
  s << "\n## Files\n\n"
    << "- `repro.py`: `python repro.py` (needs torch and safetensors); exit status 1 when the "
       "failure reproduces, 0 when not, 2 when it cannot run\n"
    << "- `tensors.safetensors`: " << tensor_list(r.minimal)
    << " ([B, H, S, D]; recorded outputs as recorded_NAME)\n"
    << "- `case.h5`: the same case for attnscope (`attnscope case.h5`)\n";
  if (!figure.empty()) s << "- `figure.png`: " << figure << "\n";
  s << "\n## Verification\n\n" << verified << "\n";
  return s.str();
}

// --python, else $ATTNSCOPE_PYTHON, else the venv scripts/setup.sh makes ($ATTNSCOPE_VENV or
// ~/.cache/attnscope/venv, which holds torch and safetensors) when it exists, else python3.
std::string python_program(const CommandArgs& args) {
  if (const std::string* p = args.option("python")) return *p;
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : std::string();
  };
  if (std::string p = env("ATTNSCOPE_PYTHON"); !p.empty()) return p;
  fs::path venv = env("ATTNSCOPE_VENV");
  if (venv.empty()) {
    const std::string cache = env("XDG_CACHE_HOME");
    venv =
        (cache.empty() ? fs::path(env("HOME")) / ".cache" : fs::path(cache)) / "attnscope" / "venv";
  }
  std::error_code ec;
  if (fs::is_regular_file(venv / "bin" / "python", ec)) return (venv / "bin" / "python").string();
  return "python3";
}

}  // namespace

int run_repro(const CommandArgs& args) {
  if (!check_options(args, kCommand,
                     {"out", "finding", "backend", "budget", "python", "threads", "no-verify"})) {
    return kExitUnreadable;
  }
  const std::string* out_option = args.option("out");
  if (out_option == nullptr || out_option->empty()) {
    return fail(kCommand, "--out DIR is required", "e.g. --out repro_bundle");
  }
  std::optional<std::pair<FindingKind, std::string>> wanted;
  if (const std::string* f = args.option("finding")) {
    wanted = parse_finding(*f);
    if (!wanted) {
      return fail(kCommand, "unknown finding '" + *f + "'",
                  "a kind as scan prints it, e.g. --finding score_overflow or "
                  "--finding nonfinite_gradient:dK");
    }
  }
  ShrinkOptions options;
  if (const std::string* b = args.option("budget")) {
    const std::optional<double> seconds = parse_positive(*b);
    if (!seconds) return fail(kCommand, "bad --budget '" + *b + "'", "seconds > 0, e.g. 60");
    options.budget = std::chrono::duration<double>(*seconds);
  }
  if (const std::string* t = args.option("threads")) {
    const auto n = parse_threads(*t);
    if (!n) return fail(kCommand, "bad --threads '" + *t + "'", "a count from 1 to 1024");
    options.analysis.threads = *n;
  }
  std::optional<LoadedCase> loaded = load_case_ref(args, kCommand);
  if (!loaded) return kExitUnreadable;
  CaseData& data = *loaded->data;
  const std::string file = split_case_ref(args.positional[0]).first;
  if (const std::string* backend = args.option("backend")) data.info.config.run.backend = *backend;

  Result<CaseAnalysis> analysis = analyze_case(data, options.analysis);
  if (!analysis) {
    return fail(kCommand, case_error_text(file, data.info.path, analysis.error().message),
                analysis.error().hint);
  }
  const Finding* target = wanted ? find_target(analysis->findings, wanted->first, wanted->second)
                                 : default_target(analysis->findings);
  if (target == nullptr) {
    return fail(kCommand,
                file + "::" + data.info.path + " shows " +
                    (wanted ? std::string("no ") + finding_kind_name(wanted->first) +
                                  (wanted->second.empty() ? "" : " on " + wanted->second)
                            : std::string("no finding a kernel can be blamed for")) +
                    " as recorded",
                "attnscope-cli scan " + file + "::" + data.info.path + " lists its findings");
  }
  if (!reproducible_kind(target->kind)) {
    return fail(kCommand,
                std::string(finding_kind_name(target->kind)) +
                    " is about the inputs the run built or what the dump lacks, not a kernel: "
                    "there is no upstream failure to reproduce",
                "see its remedy in attnscope-cli scan");
  }
  ShrinkTarget shrink_target{target->kind, target->tensor, target->batch, target->head,
                             target->rows};
  // The shrink reads the whole case's findings and replay only: free its runs (hundreds of MB
  // for a real-size layer) before the candidates' analyses.
  analysis->runs.clear();
  analysis->clips.clear();
  analysis->recorded.clear();
  std::cerr << "repro: shrinking " << dims_text(data.info.dims) << " while it shows "
            << finding_kind_name(target->kind) << " " << target->tensor << " (budget "
            << options.budget.count() << " s)\n";
  Result<ShrinkResult> shrunk = shrink_case(data, shrink_target, options, &*analysis);
  if (!shrunk) return fail(kCommand, shrunk.error().message, shrunk.error().hint);
  const ShrinkResult& r = *shrunk;

  const CaseConfig& config = data.info.config;
  ReproCall call;
  call.backend = config.run.backend;
  call.call = written_call(call.backend);
  call.written = call.backend.empty() || !call.call.empty();
  // Not recorded, or not written out: the semantics of the kernel the finding was seen in.
  if (call.call.empty()) call.call = has_mode(r.finding, "unfused") ? "eager" : "sdpa";
  call.device = config.run.device;
  call.dtype = config.dtype.empty() ? dtype_name(data.q().dtype) : config.dtype;
  call.scale = r.minimal.info.config.effective_scale(data.info.dims.head_dim);
  call.softcap = config.softcap;
  call.causal = config.causal;
  call.causal_align =
      config.causal_align == CausalAlign::bottom_right ? "bottom_right" : "top_left";
  call.recorded_torch = config.run.torch_version;
  call.finding = finding_kind_name(r.finding.kind);
  call.finding_text = r.finding.message;
  call.expect = repro_expectation(r.finding.kind);
  call.source = file + "::" + data.info.path;

  const fs::path dir(*out_option);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(kCommand, dir.string() + ": cannot create the folder: " + ec.message());
  for (const char* name :
       {"repro.py", "tensors.safetensors", "case.h5", "figure.png", "README.md"}) {
    if (fs::equivalent(dir / name, fs::path(file), ec)) {
      return fail(kCommand, "--out " + dir.string() + " would replace the input " + file,
                  "pick another folder");
    }
  }
  for (const Status& s : {write_tensors(dir / "tensors.safetensors", r.minimal, call),
                          write_case_h5(dir / "case.h5", r.minimal),
                          write_text(dir / "repro.py", repro_script(call))}) {
    if (!s) return fail(kCommand, s.error().message, s.error().hint);
  }

  // The figure: the heatmap of the finding's tensor (S when it has none) at its head.
  std::string figure;
  const std::string views[] = {"S", "P", "dP", "dS", "O", "dQ", "dK", "dV"};
  const std::string view =
      std::find(std::begin(views), std::end(views), r.finding.tensor) != std::end(views)
          ? r.finding.tensor
          : "S";
  const ChildOutcome exported = run_child(
      {self_executable(), "export", (dir / "case.h5").string() + "::/case", "--view", view,
       "--batch", std::to_string(std::max<int64_t>(r.finding.batch, 0)), "--head",
       std::to_string(std::max<int64_t>(r.finding.head, 0)), "--out", (dir / "figure.png").string(),
       "--mode", r.finding.modes.empty() ? std::string("fused") : r.finding.modes.front()},
      120);
  if (exported.exit_code == kExitOk) {
    figure = "the " + view + " heatmap of the minimal case with attnscope's markers";
  } else {
    std::cerr << "repro: no figure: " << exported.output;
  }

  // Verification: repro.py in a child python, isolated from the user's site and this tool.
  std::string verified;
  int status = kExitOk;
  if (args.flag("no-verify")) {
    verified = "Not run (--no-verify).";
  } else {
    // Where the recorded kernel does not run here, repro.py runs the same semantics with
    // another kernel: said, and never counted as a verification.
    const bool here = runs_here(call);
    const std::string python = python_program(args);
    const ChildOutcome v = run_child({python, "-I", (dir / "repro.py").string()}, kVerifySeconds);
    std::string lead;
    if (!call.written) {
      lead = "Not verified here: repro.py does not call the recorded attention (" + call.backend +
             ") itself, which is not written out. ";
    } else if (!here) {
      lead = "Not verified here: the recorded kernel (" + call.backend + " on " +
             (call.device.empty() ? "an unrecorded device" : call.device) +
             ") does not run on this machine; run repro.py where it does. ";
    }
    // A verdict counts only with repro.py's own last line: another program (a wrong --python)
    // may exit 1 too.
    const bool said =
        (v.exit_code == 1 && v.output.find("REPRODUCED: ") != std::string::npos) ||
        (v.exit_code == 0 && v.output.find("not reproduced with ") != std::string::npos);
    if (!v.started || v.timed_out || !said) {
      // The bundle stands; only the check is missing (e.g. a python without torch).
      verified = (here ? std::string("Not verified: ") : lead) + "repro.py could not be run with " +
                 python + (v.timed_out ? " (killed after " + num(kVerifySeconds) + " s)" : "") +
                 "; --python names one with torch and safetensors:\n\n```\n" + v.output + "```";
    } else {
      const std::string result = v.exit_code == 1 ? "reproduced" : "not reproduced";
      verified = here ? std::string(v.exit_code == 1 ? "Reproduced" : "Not reproduced")
                      : lead + "Here, with another kernel of the same semantics: " + result;
      verified += " (`" + python + " -I repro.py`, exit " + std::to_string(v.exit_code) +
                  "):\n\n```\n" + v.output + "```";
      if (here && v.exit_code == 0) status = kExitFindings;
    }
  }
  std::string command = "attnscope-cli repro " + args.positional[0] + " --out " + dir.string();
  if (const std::string* f = args.option("finding")) command += " --finding " + *f;
  if (const std::string* b = args.option("backend")) command += " --backend " + *b;
  if (Status s = write_text(dir / "README.md", readme(call, data, r, command, figure, verified));
      !s) {
    return fail(kCommand, s.error().message, s.error().hint);
  }

  std::cout << "repro: " << call.finding << " " << r.finding.tensor << " of " << call.source
            << "\n  shrunk " << dims_text(data.info.dims) << " -> "
            << dims_text(r.minimal.info.dims) << ": " << count_text(r.minimal_elements) << " of "
            << count_text(r.original_elements) << " elements in " << r.tries << " analyses"
            << (r.budget_spent ? " (budget spent)" : "") << "\n";
  for (const std::string& note : r.notes) std::cout << "  - " << note << "\n";
  std::cout << "  repro.py calls " << call.call
            << (call.backend.empty() || call.backend == call.call ? "" : " (" + call.backend + ")")
            << "\n  " << verified.substr(0, verified.find('\n')) << "\n  wrote " << dir.string()
            << "/{repro.py, tensors.safetensors, case.h5, README.md"
            << (figure.empty() ? "" : ", figure.png") << "}\n";
  return status;
}

}  // namespace attnscope
