// Exit codes and shared argument handling of attnscope-cli subcommands (DESIGN §4).
#pragma once

#include <string>
#include <vector>

namespace attnscope {

enum ExitCode : int {
  kExitOk = 0,           // no error-severity finding
  kExitFindings = 1,     // at least one error-severity finding / rejected case
  kExitUnreadable = 2,   // input could not be read, or bad usage
};

// Arguments of one subcommand after the subcommand name.
struct CommandArgs {
  std::vector<std::string> positional;
  bool json = false;
  bool allow_external = false;
};

// Parses --json / --allow-external and positionals; unknown options -> error text in `error`.
CommandArgs parse_command_args(const std::vector<std::string>& args, std::string& error);

int run_info(const CommandArgs& args);

}  // namespace attnscope
