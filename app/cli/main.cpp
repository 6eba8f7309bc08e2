// attnscope-cli entry point: dispatches subcommands and maps failures to exit codes.
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"
#include "cli_usage.h"
#include "core/io/dump_probe.h"
#include "core/memory_budget.h"
#ifdef ATTNSCOPE_CLI_EXPORT
#include "export_command.h"
#endif

namespace {

const std::vector<std::string> kValued = {
    "case",    "precision", "mode",          "clip",          "clip-scope", "mask-fill",
    "scale",   "scales",    "threads",       "out",           "batch",      "head",
    "view",    "format",    "memory-budget", "probe-timeout", "shard",      "horizon",
    "finding", "backend",   "budget",        "python"};
const std::vector<std::string> kFlags = {"forward-only", "help",   "no-markers",
                                         "no-caption",   "follow", "no-verify"};

}  // namespace

namespace attnscope {

const std::string* CommandArgs::option(const std::string& name) const {
  const auto found = options.find(name);
  return found == options.end() ? nullptr : &found->second;
}

bool CommandArgs::flag(const std::string& name) const {
  return std::find(flags.begin(), flags.end(), name) != flags.end();
}

CommandArgs parse_command_args(const std::vector<std::string>& args, std::string& error) {
  CommandArgs parsed;
  for (size_t n = 0; n < args.size(); ++n) {
    const std::string& arg = args[n];
    const std::string name = arg.rfind("--", 0) == 0 ? arg.substr(2, arg.find('=') - 2) : "";
    if (arg == "-h") {
      parsed.flags.push_back("help");
    } else if (arg == "--json") {
      parsed.json = true;
    } else if (arg == "--allow-external") {
      parsed.allow_external = true;
    } else if (std::find(kValued.begin(), kValued.end(), name) != kValued.end()) {
      if (arg.find('=') != std::string::npos) {
        parsed.options[name] = arg.substr(arg.find('=') + 1);
      } else if (n + 1 < args.size()) {
        parsed.options[name] = args[++n];
      } else {
        error = "option '" + arg + "' needs a value";
      }
    } else if (std::find(kFlags.begin(), kFlags.end(), name) != kFlags.end()) {
      parsed.flags.push_back(name);
    } else if (arg.size() > 1 && arg[0] == '-') {
      error = "unknown option '" + arg + "'";
    } else {
      parsed.positional.push_back(arg);
    }
  }
  return parsed;
}

bool check_options(const CommandArgs& args, const std::string& command,
                   std::initializer_list<const char*> allowed) {
  auto ok = [&](const std::string& name) {
    return std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return name == a; });
  };
  std::vector<std::string> given = args.flags;
  for (const auto& [name, value] : args.options) given.push_back(name);
  for (const std::string& name : given) {
    if (ok(name)) continue;
    std::cerr << "attnscope-cli " << command << ": option '--" << name
              << "' does not apply to this command\n";
    return false;
  }
  return true;
}

}  // namespace attnscope

int main(int argc, char** argv) {
  using namespace attnscope;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    (args.empty() ? std::cerr : std::cout) << top_usage();
    return args.empty() ? kExitUnreadable : kExitOk;
  }
  const std::string command = args[0];
  std::string error;
  CommandArgs parsed =
      parse_command_args(std::vector<std::string>(args.begin() + 1, args.end()), error);
  const char* usage = command_usage(command);
  if (usage == nullptr) {
    std::cerr << "attnscope-cli: unknown command '" << command << "'\n\n" << top_usage();
    return kExitUnreadable;
  }
  if (!error.empty()) {
    std::cerr << "attnscope-cli " << command << ": " << error << "\n\n" << usage;
    return kExitUnreadable;
  }
  if (parsed.flag("help")) {
    std::cout << usage;
    return kExitOk;
  }
  if (const std::string* budget = parsed.option("memory-budget")) {
    const Status set = set_memory_budget(*budget, "--memory-budget");
    if (!set) {
      std::cerr << "attnscope-cli " << command << ": " << set.error().describe() << "\n";
      return kExitUnreadable;
    }
    parsed.options.erase("memory-budget");  // applies to every command
  }
  if (const std::string* timeout = parsed.option("probe-timeout")) {
    const std::optional<double> seconds = parse_probe_timeout(*timeout);
    if (!seconds) {
      std::cerr << "attnscope-cli " << command << ": bad --probe-timeout '" << *timeout
                << "'\n  hint: a number of seconds > 0 (at most 1e6), e.g. --probe-timeout 300\n";
      return kExitUnreadable;
    }
    // Wins over ATTNSCOPE_PROBE_TIMEOUT; applies to every command that opens a dump.
    set_probe_timeout(*seconds);
    parsed.options.erase("probe-timeout");
  }
  if (command == "info") return run_info(parsed);
  if (command == "scan") return run_scan(parsed);
  if (command == "merge") return run_merge(parsed);
  if (command == "health") return run_health(parsed);
  if (command == "repro") return run_repro(parsed);
  if (command == "compare" || command == "matrix") return run_matrix(parsed);
  if (command == "sweep") return run_sweep(parsed);
  if (command == "run") return run_results(parsed);
  if (command == "step") return run_step(parsed);
  if (command == "convert") return run_convert(parsed);
#ifdef ATTNSCOPE_CLI_EXPORT
  if (command == "export") return run_export(parsed);
#else
  if (command == "export") {
    std::cerr << "attnscope-cli export: this build has no Qt (ATTNSCOPE_WITH_GUI=OFF)\n";
  }
#endif
  return kExitUnreadable;
}
