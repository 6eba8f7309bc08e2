// JsonWriter: comma placement, indentation and string escaping.
#include "json_writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace attnscope {

std::string json_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

void JsonWriter::newline() {
  if (!pretty_) return;
  out_ << '\n' << std::string(2 * has_items_.size(), ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (has_items_.empty()) return;
  if (has_items_.back()) out_ << ',';
  has_items_.back() = true;
  newline();
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ << '{';
  has_items_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  const bool had = has_items_.back();
  has_items_.pop_back();
  if (had) newline();
  out_ << '}';
  if (has_items_.empty() && pretty_) out_ << '\n';
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_ << '[';
  has_items_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  const bool had = has_items_.back();
  has_items_.pop_back();
  if (had) newline();
  out_ << ']';
  return *this;
}

JsonWriter& JsonWriter::key(const std::string& name) {
  before_value();
  out_ << json_escape(name) << (pretty_ ? ": " : ":");
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(const std::string& text) {
  before_value();
  out_ << json_escape(text);
  return *this;
}

void JsonWriter::write_double(double number) {
  if (std::isnan(number)) {
    out_ << "\"NaN\"";
  } else if (std::isinf(number)) {
    out_ << (number > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else {
    // Shortest of %.15g .. %.17g that reads back as the same double.
    char buf[32];
    for (int digits = 15; digits <= 17; ++digits) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, number);
      if (std::strtod(buf, nullptr) == number) break;
    }
    out_ << buf;
  }
}

JsonWriter& JsonWriter::value(double number) {
  before_value();
  write_double(number);
  return *this;
}

JsonWriter& JsonWriter::value(int64_t number) {
  before_value();
  out_ << number;
  return *this;
}

JsonWriter& JsonWriter::raw(const std::string& json_text) {
  before_value();
  out_ << json_text;
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) {
  before_value();
  out_ << (flag ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_ << "null";
  return *this;
}

JsonWriter& JsonWriter::value(const std::vector<int64_t>& numbers) {
  before_value();
  out_ << '[';
  for (size_t i = 0; i < numbers.size(); ++i) out_ << (i ? ", " : "") << numbers[i];
  out_ << ']';
  return *this;
}

JsonWriter& JsonWriter::value(const std::vector<double>& numbers) {
  before_value();
  out_ << '[';
  for (size_t i = 0; i < numbers.size(); ++i) {
    if (i) out_ << ", ";
    write_double(numbers[i]);
  }
  out_ << ']';
  return *this;
}

JsonWriter& JsonWriter::value(const std::vector<std::string>& texts) {
  begin_array();
  for (const std::string& t : texts) value(t);
  return end_array();
}

}  // namespace attnscope
