// attnscope-cli entry point: dispatches subcommands and maps failures to exit codes.
#include <iostream>
#include <string>
#include <vector>

#include "cli_common.h"

namespace {

constexpr const char* kUsage =
    "usage: attnscope-cli <command> [options] FILE\n"
    "\n"
    "commands:\n"
    "  info FILE [--json] [--allow-external]   list the cases of a dump: shapes, dtypes,\n"
    "                                           attributes, recorded outputs\n"
    "\n"
    "exit codes: 0 ok, 1 error-severity findings (e.g. rejected cases), 2 unreadable input or\n"
    "bad usage\n";

}  // namespace

namespace attnscope {

CommandArgs parse_command_args(const std::vector<std::string>& args, std::string& error) {
  CommandArgs parsed;
  for (const std::string& arg : args) {
    if (arg == "--json") {
      parsed.json = true;
    } else if (arg == "--allow-external") {
      parsed.allow_external = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      error = "unknown option '" + arg + "'";
    } else {
      parsed.positional.push_back(arg);
    }
  }
  return parsed;
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
  std::cerr << "attnscope-cli: unknown command '" << command << "'\n\n" << kUsage;
  return kExitUnreadable;
}
