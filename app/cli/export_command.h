// `attnscope-cli export`: an annotated, stamped figure of one view of one head (PNG / PDF /
// SVG), rendered headless with the GUI's own plotting code.
#pragma once

#include "cli_common.h"

namespace attnscope {

// Exit 0 when the figure was written, 2 on bad usage or unreadable input.
int run_export(const CommandArgs& args);

}  // namespace attnscope
