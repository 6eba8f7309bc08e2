// `attnscope-cli convert IN[::CASE] --out DUMP.h5 [--case GLOB]`: rewrites the cases of any dump
// attnscope reads (HDF5, a torch.save .pt, an .npz, a .safetensors file) as a schema-1 HDF5 dump:
// same case paths, tensors under their canonical names in their stored element types (bfloat16
// as uint16 + dtype attribute), the case fields as attributes, plus `converted_from` (the
// source file and its format). Written through DumpWriter (a hidden temporary,
// fsynced and renamed over DUMP.h5 when complete); the input is never overwritten; Ctrl-C
// removes the temporary and writes nothing.
#include <filesystem>
#include <iostream>

#include "cli_options.h"
#include "interrupt.h"

namespace attnscope {
namespace {

constexpr const char* kCommand = "convert";

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  return std::filesystem::exists(b, error) && std::filesystem::equivalent(a, b, error);
}

}  // namespace

int run_convert(const CommandArgs& args) {
  if (!check_options(args, kCommand, {"out", "case"})) return kExitUnreadable;
  const std::string* out = args.option("out");
  if (args.positional.size() != 1 || out == nullptr || out->empty()) {
    return fail(kCommand, "expected IN[::CASE] and --out DUMP.h5",
                "attnscope-cli convert bug_report.pt --out dump.h5");
  }
  const std::string file = split_case_ref(args.positional[0]).first;
  if (same_file(file, *out)) {
    return fail(kCommand, "--out " + *out + " is the input file", "write to another path");
  }
  std::optional<DumpReader> dump = open_dump(kCommand, file, args.allow_external);
  if (!dump) return kExitUnreadable;
  std::string pattern = split_case_ref(args.positional[0]).second;
  if (const std::string* c = args.option("case")) pattern = *c;
  const size_t broken = report_broken(kCommand, *dump, pattern).size();
  const std::optional<std::vector<const CaseInfo*>> cases = select_cases(kCommand, *dump, pattern);
  if (!cases) return kExitUnreadable;
  Result<DumpWriter> created = DumpWriter::create(*out);
  if (!created) return fail(kCommand, created.error().message, created.error().hint);
  std::optional<DumpWriter> writer(std::move(*created));
  set_interrupt_cleanup(writer->temp_path());
  install_interrupt_handler();
  const auto keep_open = dump->keep_open();  // one open of the file for every case
  for (const CaseInfo* info : *cases) {
    if (interrupt_requested()) {
      writer.reset();  // removes the temporary
      std::cerr << "attnscope-cli convert: interrupted; " << *out << " not written\n";
      return kExitInterrupted;
    }
    Result<CaseData> data = dump->load(info->path);
    Status written = data ? writer->write_case(info->path, *data) : Status(data.error());
    if (written) {
      written = writer->write_attributes(info->path,
                                         {{"converted_from", file + " (" + dump->format() + ")"}});
    }
    if (!written) {
      writer.reset();
      return fail(kCommand, case_error_text(file, info->path, written.error().message),
                  written.error().hint);
    }
  }
  if (const Status closed = writer->close(); !closed) {
    return fail(kCommand, "cannot write " + *out + ": " + closed.error().message,
                closed.error().hint);
  }
  std::cout << "wrote " << cases->size() << " case" << (cases->size() == 1 ? "" : "s") << " of "
            << file << " (" << dump->format() << ") to " << *out
            << (broken > 0 ? ", skipped " + std::to_string(broken) + " unreadable" : "") << "\n";
  return broken > 0 ? kExitUnreadable : kExitOk;
}

}  // namespace attnscope
