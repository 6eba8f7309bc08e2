// `attnscope-cli run FILE[::CASE] --out RESULTS.h5`: recomputes cases with the instrumented CPU
// kernels and writes a schema-1 dump holding, per case, the inputs and attributes, the
// recomputed o, lse, dq, dk, dv (fp32), an extra dataset `m` and a `findings` attribute (the
// findings as a JSON string). Cases run on --threads workers and are written in case order to
// RESULTS.h5.tmp, renamed when complete; Ctrl-C removes the temp file and writes nothing.
#include <hdf5.h>

#include <cstdio>
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

// Per case: `m` shaped like the stored `lse`, and the `findings` string attribute.
struct Extras {
  std::string path;
  std::vector<float> m;
  std::string findings;
};

bool write_extras(const std::string& file, const std::vector<Extras>& extras) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return false;
  bool ok = true;
  for (const Extras& e : extras) {
    const hid_t group = H5Gopen2(f, e.path.c_str(), H5P_DEFAULT);
    const hid_t lse = group < 0 ? -1 : H5Dopen2(group, "lse", H5P_DEFAULT);
    const hid_t space = lse < 0 ? -1 : H5Dget_space(lse);
    const hid_t m = space < 0 ? -1
                              : H5Dcreate2(group, "m", H5T_IEEE_F32LE, space, H5P_DEFAULT,
                                           H5P_DEFAULT, H5P_DEFAULT);
    ok = ok && m >= 0 &&
         H5Dwrite(m, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, e.m.data()) >= 0;
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, e.findings.size() + 1);
    const hid_t scalar = H5Screate(H5S_SCALAR);
    const hid_t attr =
        group < 0 ? -1 : H5Acreate2(group, "findings", type, scalar, H5P_DEFAULT, H5P_DEFAULT);
    ok = ok && attr >= 0 && H5Awrite(attr, type, e.findings.c_str()) >= 0;
    for (hid_t id : {attr, m}) {
      if (id >= 0) id == attr ? H5Aclose(id) : H5Dclose(id);
    }
    H5Sclose(scalar);
    H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    if (lse >= 0) H5Dclose(lse);
    if (group >= 0) H5Gclose(group);
  }
  return H5Fclose(f) >= 0 && ok;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  return std::filesystem::exists(b, error) && std::filesystem::equivalent(a, b, error);
}

// --mode fused|unfused (default fused) and the shared run settings.
bool read_settings(const CommandArgs& args, AnalysisSettings& s) {
  if (!read_run_settings(args, kCommand, s.run)) return false;
  s.modes = {Mode::fused};
  if (const std::string* m = args.option("mode")) {
    const auto modes = parse_modes(*m);
    if (!modes || modes->size() != 1)
      return reject(kCommand, "bad --mode '" + *m + "'", "use fused or unfused");
    s.modes = *modes;
  }
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
  const std::optional<std::vector<const CaseInfo*>> cases =
      select_cases(kCommand, *dump, case_path);
  if (!cases) return kExitUnreadable;
  std::vector<std::string> paths;
  for (const CaseInfo* c : *cases) paths.push_back(c->path);
  const std::string temp = *out + ".tmp";
  Result<DumpWriter> created = DumpWriter::create(temp);
  if (!created) return fail(kCommand, created.error().message, created.error().hint);
  std::optional<DumpWriter> writer(std::move(*created));
  const auto [workers, kernel_threads] = split_threads(settings.threads, paths.size());
  settings.threads = kernel_threads;
  set_interrupt_cleanup(temp);
  install_interrupt_handler();

  // One slot per case in flight: filled by a worker, written and cleared in case order.
  struct Slot {
    std::optional<CaseData> data;
    std::optional<CaseAnalysis> analysis;
    Error error;
  };
  std::vector<Slot> slots(paths.size());
  std::vector<Extras> extras;
  bool errors = false;
  auto work = [&](size_t n) {
    Slot& slot = slots[n];
    Result<CaseData> data = dump->load(paths[n]);
    Result<CaseAnalysis> a =
        data ? analyze_case(*data, settings) : Result<CaseAnalysis>(data.error());
    if (!a) {
      slot.error = a.error();
      return;
    }
    slot.data = std::move(*data);
    slot.analysis = std::move(*a);
  };
  auto emit = [&](size_t n) {
    Slot slot = std::move(slots[n]);
    const ModeRun* run = slot.analysis ? slot.analysis->run(settings.modes[0]) : nullptr;
    const Status written = !slot.analysis ? Status(slot.error)
                           : run ? writer->write_case(paths[n], results_case(*slot.data, *run))
                                 : Status(make_error(ErrorCode::io, "the analysis made no run"));
    if (!written) {
      Error e = written.error();
      e.message = file + "::" + paths[n] + ": " + e.message;
      throw e;  // stops the pipeline
    }
    errors = errors || has_error(slot.analysis->findings);
    extras.push_back({paths[n], run->out.m, findings_text(slot.analysis->findings)});
    std::cout << paths[n] << ": " << slot.analysis->findings.size() << " findings" << std::endl;
  };
  PipelineOptions options;
  options.workers = workers;
  options.progress_label = kCommand;
  PipelineOutcome outcome;
  try {
    outcome = run_in_order(paths.size(), options, work, emit);
  } catch (const Error& e) {
    writer.reset();
    std::remove(temp.c_str());
    return fail(kCommand, e.message, e.hint);
  }
  if (outcome.interrupted) {
    writer.reset();  // closes the file before it is removed
    std::remove(temp.c_str());
    std::cerr << "attnscope-cli run: interrupted after " << outcome.emitted << " of "
              << paths.size() << " cases; " << *out << " not written\n";
    return kExitInterrupted;
  }
  const Status closed = writer->close();
  if (!closed || !write_extras(temp, extras) || std::rename(temp.c_str(), out->c_str()) != 0) {
    std::remove(temp.c_str());
    return fail(kCommand, "cannot write " + *out, "check the path and the disk space");
  }
  std::cout << "wrote " << paths.size() << " case" << (paths.size() == 1 ? "" : "s") << " to "
            << *out << "\n";
  return errors ? kExitFindings : kExitOk;
}

}  // namespace attnscope
