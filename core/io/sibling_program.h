// Where attnscope's helper programs are (attnscope-probe, attnscope-cli): installed next to
// the running program, in the build tree under app/<dir>/ seen from app/ (the window) or from
// another app/ subfolder (the CLI); an environment variable overrides both.
#pragma once

#include <string>

namespace attnscope {

// The program `name` (e.g. "attnscope-cli") built in app/`build_dir`/ ("cli"): $`env_var` when
// set, else the first executable candidate; empty when none is found.
std::string find_sibling_program(const std::string& name, const std::string& build_dir,
                                 const char* env_var);

}  // namespace attnscope
