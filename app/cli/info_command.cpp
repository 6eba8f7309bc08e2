// `attnscope-cli info FILE`: lists the cases of a dump (path, shapes, dtypes, attributes,
// recorded outputs), the rejected groups and the cases whose data cannot be read, as a table
// or, with --json, as one JSON document.
#include <algorithm>
#include <iostream>

#include "case_format.h"
#include "cli_common.h"
#include "cli_options.h"
#include "core/io/hdf5_dump.h"
#include "core/io/run_folder.h"
#include "info_run_folder.h"
#include "json_writer.h"
#include "text_table.h"

namespace attnscope {
namespace {

constexpr const char* kRecordedNames[] = {"o", "lse", "dq", "dk", "dv"};

// Distinct stored dtypes of q/k/v, e.g. "float16" or "float16/float32".
std::string input_dtypes(const CaseInfo& c) {
  std::string out;
  for (const char* name : {"q", "k", "v"}) {
    const TensorInfo* t = c.find(name);
    if (t == nullptr) continue;
    const std::string dt = dtype_name(t->dtype);
    if (out.find(dt) == std::string::npos) out += (out.empty() ? "" : "/") + dt;
  }
  return out;
}

std::string recorded_text(const CaseInfo& c) {
  std::string out;
  for (const char* name : kRecordedNames) {
    if (c.has(name)) out += (out.empty() ? "" : ",") + std::string(name);
  }
  return out.empty() ? "-" : out;
}

std::string extras_text(const CaseInfo& c) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  if (c.has("do")) add("do");
  if (c.has("mask")) add("mask");
  if (c.has("bias")) add("bias");
  const CaseConfig& cfg = c.config;
  if (cfg.causal) {
    add(cfg.causal_align == CausalAlign::bottom_right ? "causal(bottom_right)" : "causal");
  }
  if (cfg.softcap != 0) add("softcap=" + format_number(cfg.softcap));
  return out.empty() ? "-" : out;
}

// Each distinct description once: "PATH: text" or "PATH (+N more): text" for a series.
void print_descriptions(const std::vector<CaseInfo>& cases) {
  std::vector<std::pair<const CaseInfo*, int>> distinct;
  for (const CaseInfo& c : cases) {
    if (c.config.description.empty()) continue;
    auto same = [&](const auto& entry) {
      return entry.first->config.description == c.config.description;
    };
    auto found = std::find_if(distinct.begin(), distinct.end(), same);
    if (found == distinct.end()) {
      distinct.push_back({&c, 0});
    } else {
      ++found->second;
    }
  }
  if (!distinct.empty()) std::cout << "\n";
  for (const auto& [c, more] : distinct) {
    std::cout << c->path;
    if (more > 0) std::cout << " (+" << more << " more)";
    std::cout << ": " << c->config.description << "\n";
  }
}

void print_table(const DumpReader& dump, const std::vector<CaseInfo>& cases) {
  std::cout << dump.path() << " (" << dump.format() << "): " << cases.size() << " case"
            << (cases.size() == 1 ? "" : "s");
  if (dump.health_blocks() > 0) {
    std::cout << ", attention health statistics in " << dump.health_blocks()
              << " blocks (attnscope-cli health " << dump.path() << ")";
  }
  std::cout << "\n\n";
  TextTable table(
      {"path", "name", "shape", "stored", "run dtype", "layout", "scale", "inputs", "recorded"});
  for (const CaseInfo& c : cases) {
    const CaseConfig& cfg = c.config;
    const std::string scale =
        format_number(cfg.effective_scale(c.dims.head_dim)) + (cfg.scale ? "" : " (default)");
    table.add_row({c.path, cfg.name.empty() ? "-" : cfg.name, dims_text(c.dims), input_dtypes(c),
                   cfg.dtype.empty() ? "-" : cfg.dtype, layout_name(cfg.layout), scale,
                   extras_text(c), recorded_text(c)});
  }
  table.print(std::cout);
  print_descriptions(cases);
  if (!dump.rejected().empty()) {
    std::cout << "\nrejected groups:\n";
    for (const Error& e : dump.rejected()) std::cout << "  " << e.describe() << "\n";
  }
  if (!dump.broken().empty()) {
    std::cout << "\ncases whose data cannot be read (skipped by scan and run):\n";
    for (const BrokenCase& b : dump.broken()) {
      std::cout << "  " << b.info.path << " " << dims_text(b.info.dims) << ": "
                << b.error.describe() << "\n";
    }
  }
}

void write_config(JsonWriter& json, const CaseInfo& c) {
  json.key("config").begin_object();
  write_case_config_fields(json, c);
  json.end_object();
}

void write_json(const DumpReader& dump, const std::vector<CaseInfo>& cases) {
  JsonWriter json(std::cout);
  json.begin_object();
  json.field("file", dump.path());
  json.field("format", dump.format());
  json.key("cases").begin_array();
  for (const CaseInfo& c : cases) {
    json.begin_object();
    json.field("path", c.path);
    json.field("name", c.config.name);
    json.field("description", c.config.description);
    write_case_shape(json, c.dims);
    write_config(json, c);
    json.key("tensors").begin_object();
    for (const TensorInfo& t : c.tensors) {
      json.key(t.name).begin_object();
      json.field("dataset", t.dataset).field("dtype", dtype_name(t.dtype));
      json.field("shape", t.shape);
      json.end_object();
    }
    json.end_object();
    json.key("recorded").begin_array();
    for (const char* name : kRecordedNames) {
      if (c.has(name)) json.value(name);
    }
    json.end_array();
    json.end_object();
  }
  json.end_array();
  json.key("rejected").begin_array();
  for (const Error& e : dump.rejected()) {
    json.begin_object();
    json.field("code", error_code_name(e.code)).field("message", e.message);
    json.field("hint", e.hint);
    json.end_object();
  }
  json.end_array();
  json.key("broken").begin_array();
  for (const BrokenCase& b : dump.broken()) {
    json.begin_object();
    json.field("path", b.info.path).field("code", error_code_name(b.error.code));
    json.field("message", b.error.message).field("hint", b.error.hint);
    json.end_object();
  }
  json.end_array();
  json.end_object();
}

}  // namespace

int run_info(const CommandArgs& args) {
  if (!check_options(args, "info", {})) return kExitUnreadable;
  if (args.positional.size() != 1) {
    std::cerr << "attnscope-cli info: expected exactly one FILE[::CASE] (got "
              << args.positional.size() << ")\n";
    return kExitUnreadable;
  }
  const auto [file, case_path] = split_case_ref(args.positional[0]);
  if (case_path.empty() && is_directory(file)) return run_info_folder(args, file);
  std::optional<DumpReader> dump = open_dump("info", file, args.allow_external);
  if (!dump) return kExitUnreadable;
  std::vector<CaseInfo> cases = dump->cases();
  if (!case_path.empty()) {
    const std::optional<std::string> one = find_case("info", *dump, case_path);
    if (!one) return kExitUnreadable;
    cases.erase(std::remove_if(cases.begin(), cases.end(),
                               [&](const CaseInfo& c) { return c.path != *one; }),
                cases.end());
  }
  if (args.json) {
    write_json(*dump, cases);
  } else {
    print_table(*dump, cases);
  }
  return dump->rejected().empty() && dump->broken().empty() ? kExitOk : kExitFindings;
}

}  // namespace attnscope
