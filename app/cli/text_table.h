// Plain-text table with auto-sized columns for the CLI's human-readable output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace attnscope {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace attnscope
