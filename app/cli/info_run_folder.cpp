// `attnscope-cli info RUN_FOLDER`: the dumps of a multi-rank run (rank, world size, local
// rank, host, steps, cases) and a step x layer overview naming the ranks that recorded each
// (step, layer), as tables or, with --json, one document.
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "cli_options.h"
#include "info_run_folder.h"
#include "scan_report.h"
#include "text_table.h"

namespace attnscope {
namespace {

// (step, micro-batch, layer), -1 for an absent one -> the ranks that recorded it.
using Place = std::tuple<int64_t, int64_t, int64_t>;
using Overview = std::map<Place, std::set<int64_t>>;

Overview overview_of(const Inputs& inputs) {
  Overview out;
  for (const InputDump& d : inputs.dumps) {
    for (const CaseInfo& c : d.reader.cases()) {
      const CaseConfig& cfg = c.config;
      out[{cfg.step.value_or(-1), cfg.run.micro_batch.value_or(-1), cfg.layer.value_or(-1)}].insert(
          *d.rank);
    }
  }
  return out;
}

// "0-3" for 0, 1, 2, 3; else "0,2".
std::string ranks_text(const std::set<int64_t>& ranks) {
  const bool contiguous =
      *ranks.rbegin() - *ranks.begin() + 1 == static_cast<int64_t>(ranks.size());
  if (contiguous && ranks.size() > 2) {
    return std::to_string(*ranks.begin()) + "-" + std::to_string(*ranks.rbegin());
  }
  std::string out;
  for (int64_t r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

std::string known(int64_t v) {
  return v >= 0 ? std::to_string(v) : "-";
}

void print_tables(const Inputs& inputs, const ReportHead& head, const Overview& overview) {
  size_t cases = 0;
  std::set<int64_t> ranks;
  for (const ReportHead::File& f : head.files) {
    cases += static_cast<size_t>(f.cases);
    ranks.insert(f.rank);
  }
  std::cout << inputs.path << ": run folder, " << head.files.size() << " dump"
            << (head.files.size() == 1 ? "" : "s") << ", ranks " << ranks_text(ranks) << " of "
            << run_world_size(head) << ", " << cases << " case" << (cases == 1 ? "" : "s")
            << "\n\n";
  TextTable files({"rank", "dump", "world size", "local rank", "host", "steps", "cases"});
  for (size_t n = 0; n < head.files.size(); ++n) {
    const ReportHead::File& f = head.files[n];
    std::set<int64_t> steps;
    for (const CaseInfo& c : inputs.dumps[n].reader.cases()) {
      if (c.config.step) steps.insert(*c.config.step);
    }
    files.add_row({std::to_string(f.rank), f.path, known(f.world_size), known(f.local_rank),
                   f.host.empty() ? "-" : f.host, steps.empty() ? "-" : ranks_text(steps),
                   std::to_string(f.cases)});
  }
  files.print(std::cout);
  // Rows (step, micro-batch), columns layers; each cell the ranks that recorded it.
  std::set<int64_t> layers;
  std::map<std::pair<int64_t, int64_t>, std::map<int64_t, std::string>> rows;
  for (const auto& [place, recorded] : overview) {
    const auto [step, micro, layer] = place;
    layers.insert(layer);
    rows[{step, micro}][layer] = ranks_text(recorded);
  }
  std::vector<std::string> header = {"step"};
  for (int64_t l : layers) header.push_back(l >= 0 ? "layer " + std::to_string(l) : "-");
  TextTable grid(header);
  for (const auto& [key, cells] : rows) {
    std::string step = key.first >= 0 ? std::to_string(key.first) : "-";
    if (key.second > 0) step += " (micro-batch " + std::to_string(key.second) + ")";
    std::vector<std::string> row = {step};
    for (int64_t l : layers) row.push_back(cells.count(l) ? cells.at(l) : ".");
    grid.add_row(row);
  }
  std::cout << "\nranks that recorded each step and layer:\n";
  grid.print(std::cout);
  for (const InputDump& d : inputs.dumps) {
    for (const Error& e : d.reader.rejected()) std::cout << "rejected: " << e.describe() << "\n";
    for (const BrokenCase& b : d.reader.broken()) {
      std::cout << "unreadable: " << d.name << "::" << b.info.path << ": " << b.error.describe()
                << "\n";
    }
  }
}

void write_json(const Inputs& inputs, const ReportHead& head, const Overview& overview) {
  JsonWriter json(std::cout);
  write_report_head(json, head);
  json.field("world_size", run_world_size(head));
  json.key("overview").begin_array();
  for (const auto& [place, recorded] : overview) {
    const auto [step, micro, layer] = place;
    json.begin_object();
    for (const auto& [key, v] :
         {std::pair{"step", step}, {"micro_batch", micro}, {"layer", layer}}) {
      json.key(key);
      if (v >= 0)
        json.value(v);
      else
        json.null();
    }
    json.field("ranks", std::vector<int64_t>(recorded.begin(), recorded.end())).end_object();
  }
  json.end_array();
  json.key("rejected").begin_array();
  for (const InputDump& d : inputs.dumps) {
    for (const Error& e : d.reader.rejected()) {
      json.begin_object().field("file", d.name).field("message", e.message);
      json.field("hint", e.hint).end_object();
    }
  }
  json.end_array();
  json.key("broken").begin_array();
  for (const InputDump& d : inputs.dumps) {
    for (const BrokenCase& b : d.reader.broken()) {
      json.begin_object().field("path", d.name + "::" + b.info.path);
      json.field("message", b.error.message).field("hint", b.error.hint).end_object();
    }
  }
  for (const Inputs::Unopened& u : inputs.unopened) {
    json.begin_object().field("path", u.name).field("message", u.error.message);
    json.field("hint", u.error.hint).end_object();
  }
  json.end_array();
  json.end_object();
}

}  // namespace

int run_info_folder(const CommandArgs& args, const std::string& folder) {
  const std::optional<Inputs> inputs = open_inputs("info", folder, args.allow_external);
  if (!inputs) return kExitUnreadable;
  const ReportHead head = report_head(*inputs);
  const Overview overview = overview_of(*inputs);
  if (args.json) {
    write_json(*inputs, head, overview);
  } else {
    print_tables(*inputs, head, overview);
  }
  if (!inputs->unopened.empty()) return kExitUnreadable;
  bool flawed = false;
  for (const InputDump& d : inputs->dumps) {
    flawed = flawed || !d.reader.rejected().empty() || !d.reader.broken().empty();
  }
  return flawed ? kExitFindings : kExitOk;
}

}  // namespace attnscope
