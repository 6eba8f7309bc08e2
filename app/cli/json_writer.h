// Minimal streaming JSON writer for the CLI's --json output (escaping, commas, non-finite
// numbers written as the strings "NaN", "Infinity", "-Infinity").
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace attnscope {

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out, bool pretty = true) : out_(out), pretty_(pretty) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(const std::string& name);  // next value belongs to this key

  JsonWriter& value(const std::string& text);
  JsonWriter& value(const char* text) { return value(std::string(text)); }
  JsonWriter& value(double number);
  JsonWriter& value(int64_t number);
  JsonWriter& value(int number) { return value(static_cast<int64_t>(number)); }
  JsonWriter& value(bool flag);
  JsonWriter& null();
  JsonWriter& value(const std::vector<int64_t>& numbers);
  JsonWriter& value(const std::vector<double>& numbers);
  JsonWriter& value(const std::vector<std::string>& texts);
  // A value written before by a JsonWriter at the same depth, copied verbatim (`merge`).
  JsonWriter& raw(const std::string& json_text);

  // key(name).value(v) in one call.
  template <typename T>
  JsonWriter& field(const std::string& name, const T& v) {
    key(name);
    return value(v);
  }

 private:
  void before_value();
  void write_double(double number);
  void newline();

  std::ostream& out_;
  bool pretty_;
  std::vector<bool> has_items_;  // per open container: something written already
  bool after_key_ = false;
};

std::string json_escape(const std::string& text);

}  // namespace attnscope
