// `attnscope-cli info` of a run folder (info_command.cpp hands folders here).
#pragma once

#include <string>

#include "cli_common.h"

namespace attnscope {

int run_info_folder(const CommandArgs& args, const std::string& folder);

}  // namespace attnscope
