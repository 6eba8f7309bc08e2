// Atomic replacement of a file (issue 7, "nothing lost"): the content is written to a hidden
// temporary file in the target's directory (".NAME.PID-N.tmp", never matching *.h5) and only
// commit() makes it visible: fsync, rename over the target, fsync of the directory. Until then
// the previous file at the target path is untouched; a crash or SIGKILL leaves it intact plus
// at most one hidden temporary, which the next AtomicFile for the same target removes.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"

namespace attnscope {

class AtomicFile {
 public:
  // Reserves the temporary next to `target` (created empty, exclusive) after removing stale
  // temporaries of `target` left by processes that no longer run.
  static Result<AtomicFile> create(const std::string& target);
  AtomicFile(AtomicFile&&) noexcept;
  AtomicFile& operator=(AtomicFile&&) noexcept;
  ~AtomicFile();  // discard() unless committed

  const std::string& target() const;
  const std::string& temp_path() const;  // where the content is written

  // The closed temporary becomes the target: fsync(temp), rename(temp, target), fsync(dir).
  Status commit();
  // Removes the temporary; the target keeps its previous content.
  void discard();

 private:
  struct State;
  explicit AtomicFile(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// "dir/.NAME." prefix shared by the temporaries of `target` (for tests and clean-up).
std::string atomic_temp_prefix(const std::string& target);

}  // namespace attnscope
