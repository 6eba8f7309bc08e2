// Exit codes and shared argument handling of attnscope-cli subcommands (DESIGN §4).
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace attnscope {

enum ExitCode : int {
  kExitOk = 0,          // no error-severity finding
  kExitFindings = 1,    // at least one error-severity finding / rejected case / broken run
  kExitUnreadable = 2,  // input could not be read, or bad usage
};

// Arguments of one subcommand after the subcommand name.
struct CommandArgs {
  std::vector<std::string> positional;
  bool json = false;
  bool allow_external = false;
  std::map<std::string, std::string> options;  // "--case PATH" / "--case=PATH" -> {"case", PATH}
  std::vector<std::string> flags;              // other flags without a value ("forward-only")

  const std::string* option(const std::string& name) const;
  bool flag(const std::string& name) const;
};

// Parses --json / --allow-external, the valued options (--case, --precision, --mode, --clip,
// --clip-scope, --mask-fill, --scale, --scales, --threads, --out, --batch, --head) and the flags
// --forward-only, --no-markers, --follow and --help / -h, and --shard; anything else
// starting with '-' -> error text in `error`.
CommandArgs parse_command_args(const std::vector<std::string>& args, std::string& error);

// Prints "attnscope-cli COMMAND: option --X does not apply" and returns false when an option
// or flag is not in `allowed` (names without "--").
bool check_options(const CommandArgs& args, const std::string& command,
                   std::initializer_list<const char*> allowed);

int run_info(const CommandArgs& args);
int run_scan(const CommandArgs& args);
int run_matrix(const CommandArgs& args);
int run_sweep(const CommandArgs& args);
int run_results(const CommandArgs& args);  // `run`
int run_step(const CommandArgs& args);
int run_convert(const CommandArgs& args);
int run_merge(const CommandArgs& args);
int run_health(const CommandArgs& args);
int run_repro(const CommandArgs& args);

}  // namespace attnscope
