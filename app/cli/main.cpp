// attnscope-cli entry point: dispatches subcommands and maps failures to exit codes.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "cli_common.h"

namespace {

constexpr const char* kUsage =
    "usage: attnscope-cli <command> [options] FILE\n"
    "\n"
    "commands:\n"
    "  info FILE [--json] [--allow-external]\n"
    "      list the cases of a dump: shapes, dtypes, attributes, recorded outputs\n"
    "  scan FILE[::CASE] [--json] [--case PATH] [--precision fp16|bf16|fp32]\n"
    "       [--mode fused|unfused|both] [--clip NORM] [--clip-scope case|kv-head]\n"
    "       [--mask-fill neg_inf|-1e9|finfo_min|safe] [--scale S]\n"
    "      recompute every case (or one) with the instrumented CPU kernels at its recorded\n"
    "      precision in fused and unfused mode and report findings (DESIGN section 4)\n"
    "  matrix FILE::CASE [--json] [--scale S] [--mask-fill F]\n"
    "      backend matrix: the case through every kernel variant and precision vs fp64\n"
    "  sweep FILE::CASE [--json] [--scales MIN:MAX:N] [--precision P] [--mode M]\n"
    "        [--mask-fill F] [--forward-only]\n"
    "      softmax-scale sweep (log-spaced): non-finite counts and max |S| per scale and\n"
    "      precision, and the finite (safe) scale range of each\n"
    "\n"
    "exit codes: 0 ok; 1 error-severity findings (scan), rejected cases (info), a\n"
    "non-finite or failed supported run (matrix), the case's own scale non-finite in some\n"
    "series (sweep); 2 unreadable input or bad usage\n";

const std::vector<std::string> kValued = {"case",       "precision", "mode",  "clip",
                                          "clip-scope", "mask-fill", "scale", "scales"};
const std::vector<std::string> kFlags = {"forward-only"};

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
    if (arg == "--json") {
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
    (args.empty() ? std::cerr : std::cout) << kUsage;
    return args.empty() ? kExitUnreadable : kExitOk;
  }
  const std::string command = args[0];
  std::string error;
  const CommandArgs parsed =
      parse_command_args(std::vector<std::string>(args.begin() + 1, args.end()), error);
  if (!error.empty()) {
    std::cerr << "attnscope-cli " << command << ": " << error << "\n\n" << kUsage;
    return kExitUnreadable;
  }
  if (command == "info") return run_info(parsed);
  if (command == "scan") return run_scan(parsed);
  if (command == "matrix") return run_matrix(parsed);
  if (command == "sweep") return run_sweep(parsed);
  std::cerr << "attnscope-cli: unknown command '" << command << "'\n\n" << kUsage;
  return kExitUnreadable;
}
