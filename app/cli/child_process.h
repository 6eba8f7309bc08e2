// Runs a helper program of a command (the figure export, a reproducer's python) as a child
// process with its output captured and a time limit, never through a shell.
#pragma once

#include <string>
#include <vector>

namespace attnscope {

struct ChildOutcome {
  bool started = false;    // false: the program could not be run (`output` says why)
  bool timed_out = false;  // killed after the limit
  int exit_code = -1;      // the exit status; -1 when killed by a signal or not started
  std::string output;      // stdout and stderr together
};

// argv[0] is looked up on PATH when it holds no '/'.
ChildOutcome run_child(const std::vector<std::string>& argv, double timeout_seconds);

// The running executable's path (/proc/self/exe).
std::string self_executable();

}  // namespace attnscope
