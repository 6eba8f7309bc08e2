// SIGINT handler: async-signal-safe work only (an atomic store, unlink, write, _exit).
#include "interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace attnscope {
namespace {

std::atomic<bool> g_requested{false};
volatile sig_atomic_t g_count = 0;
char g_cleanup[4096] = {0};  // path unlinked by the second SIGINT; empty = none

void on_sigint(int) {
  if (g_count++ == 0) {
    g_requested.store(true);
    return;
  }
  if (g_cleanup[0] != '\0') unlink(g_cleanup);
  static const char kMessage[] = "\nattnscope-cli: interrupted again, exiting at once\n";
  const ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  (void)ignored;
  _exit(kExitInterrupted);
}

}  // namespace

static_assert(std::atomic<bool>::is_always_lock_free, "the handler stores to it");

void install_interrupt_handler() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_sigint;
  // A write blocked on a full stdout pipe resumes after the first SIGINT instead of failing
  // with EINTR, which left the stream bad and the JSON report cut short.
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
}

bool interrupt_requested() {
  return g_requested.load();
}

const std::atomic<bool>& interrupt_flag() {
  return g_requested;
}

void set_interrupt_cleanup(const std::string& path) {
  const size_t n = std::min(path.size(), sizeof g_cleanup - 1);
  std::memcpy(g_cleanup, path.data(), n);
  g_cleanup[n] = '\0';
}

}  // namespace attnscope
