// SIGINT handling of the long-running commands (scan, run, sweep): the first Ctrl-C asks them
// to stop starting new work and to report what is finished; a second one exits at once with
// status 130 after removing the temporary output file registered here.
#pragma once

#include <atomic>
#include <string>

namespace attnscope {

constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

// Installs the handler (idempotent). Commands that cannot stop cleanly do not call it and keep
// the default action.
void install_interrupt_handler();

// True once SIGINT was received after install_interrupt_handler().
bool interrupt_requested();
// The flag itself, for core loops that poll a `const std::atomic<bool>*`.
const std::atomic<bool>& interrupt_flag();

// A file the second SIGINT unlinks before exiting (a half-written --out temp); "" = none.
// Not thread-safe: set it from the main thread before the work starts.
void set_interrupt_cleanup(const std::string& path);

}  // namespace attnscope
