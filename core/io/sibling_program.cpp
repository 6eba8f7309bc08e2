// find_sibling_program: candidates relative to /proc/self/exe (sibling_program.h).
#include "core/io/sibling_program.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace attnscope {

std::string find_sibling_program(const std::string& name, const std::string& build_dir,
                                 const char* env_var) {
  if (const char* env = std::getenv(env_var); env != nullptr && *env != '\0') return env;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const fs::path& candidate :
       {self.parent_path() / name, self.parent_path() / build_dir / name,
        self.parent_path().parent_path() / build_dir / name}) {
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
  }
  return {};
}

}  // namespace attnscope
