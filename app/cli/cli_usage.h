// Usage text of attnscope-cli: the overview and the help of each command.
#pragma once

#include <string>

namespace attnscope {

const char* top_usage();
// The usage of `command` ("matrix" is compare's alias); nullptr for an unknown command.
const char* command_usage(const std::string& command);

}  // namespace attnscope
