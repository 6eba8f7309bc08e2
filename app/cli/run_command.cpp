// `attnscope-cli run FILE[::CASE] --out RESULTS.h5`: recomputes cases with the instrumented CPU
// kernels and writes a schema-1 dump holding, per case, the inputs and attributes, the
// recomputed o, lse, dq, dk, dv (fp32), an extra dataset `m` (row maxima, shaped like lse), a
// `findings` attribute (the findings as a JSON string) and the run's settings as attributes
// run_precision, run_mode, run_scale, run_mask_fill, run_backend. Cases run on --threads
// workers and are written in case order through DumpWriter (a hidden temporary, fsynced and
// renamed over RESULTS.h5 when complete); Ctrl-C removes the temporary and writes nothing.
#include <filesystem>
#include <iostream>
#include <sstream>

#include "case_pipeline.h"
#include "cli_options.h"
#include "findings_json.h"
#include "interrupt.h"

namespace attnscope {
namespace {

constexpr const char* kCommand = "run";

HostTensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  return HostTensor::from_float(DType::f32, std::move(shape), values);
}

// The inputs of `data` plus the recomputed outputs of `run`, canonical layout.
CaseData results_case(const CaseData& data, const ModeRun& run) {
  CaseData out;
  out.info = data.info;
  for (const char* name : {"q", "k", "v", "do", "mask", "bias"}) {
    if (const HostTensor* t = data.find(name)) out.tensors[name] = *t;
  }
  const CaseDims& d = data.info.dims;
  out.tensors["o"] = f32_tensor({d.batch, d.heads, d.seqlen_q, d.head_dim_v}, run.out.o);
  out.tensors["lse"] = f32_tensor({d.batch, d.heads, d.seqlen_q}, run.out.lse);
  out.tensors["dq"] = f32_tensor({d.batch, d.heads, d.seqlen_q, d.head_dim}, run.out.dq);
  out.tensors["dk"] = f32_tensor({d.batch, d.kv_heads, d.seqlen_k, d.head_dim}, run.out.dk);
  out.tensors["dv"] = f32_tensor({d.batch, d.kv_heads, d.seqlen_k, d.head_dim_v}, run.out.dv);
  return out;
}

std::string findings_text(const std::vector<Finding>& findings) {
  std::ostringstream text;
  JsonWriter json(text, false);
  json.begin_array();
  for (const Finding& f : findings) write_finding(json, f);
  json.end_array();
  return text.str();
}

// Writes `m` (shaped like the stored lse), the findings and the settings of `run` next to the
// case written at `path`.
Status write_run_record(DumpWriter& writer, const std::string& path, const CaseData& data,
                        const ModeRun& run, const CaseAnalysis& analysis,
                        const AnalysisSettings& settings) {
  const CaseDims& d = data.info.dims;
  const HostTensor m = from_canonical("lse", f32_tensor({d.batch, d.heads, d.seqlen_q}, run.out.m),
                                      data.info.config.layout);
  Status s = writer.write_extra_dataset(path, "m", m);
  if (!s) return s;
  const double scale = settings.run.scale.value_or(data.info.config.effective_scale(d.head_dim));
  return writer.write_attributes(
      path, {{"findings", findings_text(analysis.findings)},
             {"run_precision", std::string(precision_name(run.precision))},
             {"run_mode", std::string(run_name(run))},
             {"run_scale", scale},
             {"run_mask_fill", std::string(mask_fill_name(analysis.params.mask_fill))},
             {"run_backend", std::string("cpu_instrumented")}});
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  return std::filesystem::exists(b, error) && std::filesystem::equivalent(a, b, error);
}

// --mode recorded|fused|unfused|upcast (default recorded) and the shared run settings.
bool read_settings(const CommandArgs& args, AnalysisSettings& s) {
  if (!read_run_settings(args, kCommand, s.run)) return false;
  if (!read_mode_option(args, kCommand, true, s)) return false;
  if (const std::string* t = args.option("threads")) {
    const auto threads = parse_threads(*t);
    if (!threads) return reject(kCommand, "bad --threads '" + *t + "'", "a count from 1 to 1024");
    s.threads = *threads;
  }
  return true;
}

}  // namespace

int run_results(const CommandArgs& args) {
  if (!check_options(args, kCommand,
                     {"out", "case", "precision", "mode", "scale", "mask-fill", "threads"})) {
    return kExitUnreadable;
  }
  const std::string* out = args.option("out");
  if (args.positional.size() != 1 || out == nullptr || out->empty()) {
    return fail(kCommand, "expected FILE[::CASE] and --out RESULTS.h5",
                "attnscope-cli run dump.h5::/case --out results.h5");
  }
  const std::string file = split_case_ref(args.positional[0]).first;
  if (same_file(file, *out)) {
    return fail(kCommand, "--out " + *out + " is the input file", "write to another path");
  }
  AnalysisSettings settings;
  if (!read_settings(args, settings)) return kExitUnreadable;
  std::optional<DumpReader> dump = open_dump(kCommand, file, args.allow_external);
  if (!dump) return kExitUnreadable;
  std::string case_path = split_case_ref(args.positional[0]).second;
  if (const std::string* c = args.option("case")) case_path = *c;
  // Cases whose data cannot be read are reported and skipped; they make the exit code 2.
  const size_t broken = report_broken(kCommand, *dump, case_path).size();
  const std::optional<std::vector<const CaseInfo*>> cases =
      select_cases(kCommand, *dump, case_path);
  if (!cases) return kExitUnreadable;
  std::vector<std::string> paths;
  for (const CaseInfo* c : *cases) paths.push_back(c->path);
  Result<DumpWriter> created = DumpWriter::create(*out);
  if (!created) return fail(kCommand, created.error().message, created.error().hint);
  std::optional<DumpWriter> writer(std::move(*created));
  const auto [workers, kernel_threads] = split_threads(settings.threads, paths.size());
  settings.threads = kernel_threads;
  set_interrupt_cleanup(writer->temp_path());
  settings.cancelled = [] { return interrupt_requested(); };  // polled per kernel tile too
  install_interrupt_handler();

  // One slot per case in flight: filled by a worker, written and cleared in case order.
  struct Slot {
    std::optional<CaseData> data;
    std::optional<CaseAnalysis> analysis;
    Error error;
  };
  std::vector<Slot> slots(paths.size());
  bool errors = false;
  const auto keep_open = dump->keep_open();  // one open of the file for every case
  auto work = [&](size_t n) {
    Slot& slot = slots[n];
    Result<CaseData> data = dump->load(paths[n]);
    Result<CaseAnalysis> a =
        data ? analyze_case(*data, settings) : Result<CaseAnalysis>(data.error());
    if (a && a->interrupted) return false;  // cut short by Ctrl-C: never written
    if (!a) {
      slot.error = a.error();
      return true;
    }
    slot.data = std::move(*data);
    slot.analysis = std::move(*a);
    return true;
  };
  auto emit = [&](size_t n) {
    Slot slot = std::move(slots[n]);
    // The replay's kernel (or the --mode what-if): the analysis' first run.
    const ModeRun* run =
        slot.analysis && !slot.analysis->runs.empty() ? &slot.analysis->runs.front() : nullptr;
    Status written = !slot.analysis ? Status(slot.error)
                     : run          ? writer->write_case(paths[n], results_case(*slot.data, *run))
                                    : Status(make_error(ErrorCode::io, "the analysis made no run"));
    if (written) {
      written = write_run_record(*writer, paths[n], *slot.data, *run, *slot.analysis, settings);
    }
    if (!written) {
      Error e = written.error();
      e.message = case_error_text(file, paths[n], e.message);
      throw e;  // stops the pipeline
    }
    errors = errors || has_error(slot.analysis->findings);
    std::cout << paths[n] << ": " << slot.analysis->findings.size() << " findings" << std::endl;
  };
  PipelineOptions options;
  options.workers = workers;
  options.progress_label = kCommand;
  PipelineOutcome outcome;
  try {
    outcome = run_in_order(paths.size(), options, work, emit);
  } catch (const Error& e) {
    writer.reset();  // removes the temporary
    return fail(kCommand, e.message, e.hint);
  }
  if (outcome.interrupted) {
    writer.reset();
    std::cerr << "attnscope-cli run: interrupted after " << outcome.emitted << " of "
              << paths.size() << " cases; " << *out << " not written\n";
    return kExitInterrupted;
  }
  if (const Status closed = writer->close(); !closed) {
    return fail(kCommand, "cannot write " + *out + ": " + closed.error().message,
                closed.error().hint);
  }
  std::cout << "wrote " << paths.size() << " case" << (paths.size() == 1 ? "" : "s") << " to "
            << *out << (broken > 0 ? ", skipped " + std::to_string(broken) + " unreadable" : "")
            << "\n";
  if (broken > 0) return kExitUnreadable;
  return errors ? kExitFindings : kExitOk;
}

}  // namespace attnscope
