// Parsing the text arguments of pickle protocol 0 opcodes (see pickle_text.h).
#include "core/io/pickle_text.h"

#include <charconv>
#include <cmath>

namespace attnscope {

namespace {

std::optional<int64_t> decimal(const char* begin, const char* end) {
  if (begin == end) return std::nullopt;
  if (*begin == '+') ++begin;
  int64_t v = 0;
  const auto [stop, error] = std::from_chars(begin, end, v);
  if (error != std::errc() || stop != end) return std::nullopt;
  return v;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code point of `digits` hex digits at `at`; nullopt when they are not all hex.
std::optional<uint32_t> hex_value(const std::string& s, size_t at, size_t digits) {
  if (at + digits > s.size()) return std::nullopt;
  uint32_t v = 0;
  for (size_t i = 0; i < digits; ++i) {
    const int d = hex_digit(s[at + i]);
    if (d < 0) return std::nullopt;
    v = v << 4 | static_cast<uint32_t>(d);
  }
  return v;
}

bool append_utf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return true;
}

}  // namespace

std::optional<TextInteger> parse_pickle_int(const std::string& line) {
  if (line == "00" || line == "01") return TextInteger{line == "01", true};
  const std::optional<int64_t> v = decimal(line.data(), line.data() + line.size());
  if (!v) return std::nullopt;
  return TextInteger{*v, false};
}

std::optional<int64_t> parse_pickle_long(const std::string& line) {
  const size_t n = !line.empty() && line.back() == 'L' ? line.size() - 1 : line.size();
  return decimal(line.data(), line.data() + n);
}

std::optional<double> parse_pickle_float(const std::string& line) {
  if (line == "inf") return HUGE_VAL;
  if (line == "-inf") return -HUGE_VAL;
  if (line == "nan") return std::nan("");
  double v = 0;
  const char* end = line.data() + line.size();
  const auto [stop, error] = std::from_chars(line.data(), end, v);
  if (error != std::errc() || stop != end || line.empty()) return std::nullopt;
  return v;
}

std::optional<std::string> parse_pickle_string(const std::string& line) {
  if (line.size() < 2 || (line[0] != '\'' && line[0] != '"') || line.back() != line[0]) {
    return std::nullopt;
  }
  std::string out;
  for (size_t i = 1; i + 1 < line.size(); ++i) {
    if (line[i] != '\\') {
      out += line[i];
      continue;
    }
    if (i + 2 >= line.size()) return std::nullopt;  // a backslash before the closing quote
    const char c = line[++i];
    switch (c) {
      case '\\':
      case '\'':
      case '"':
        out += c;
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'x': {
        const std::optional<uint32_t> v = hex_value(line, i + 1, 2);
        if (!v || i + 3 >= line.size()) return std::nullopt;
        out += static_cast<char>(*v);
        i += 2;
        break;
      }
      default:
        return std::nullopt;
    }
  }
  return out;
}

std::optional<std::string> parse_pickle_unicode(const std::string& line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    const auto byte = static_cast<unsigned char>(line[i]);
    if (byte == '\\' && i + 1 < line.size() && (line[i + 1] == 'u' || line[i + 1] == 'U')) {
      const size_t digits = line[i + 1] == 'u' ? 4 : 8;
      const std::optional<uint32_t> cp = hex_value(line, i + 2, digits);
      if (!cp || !append_utf8(out, *cp)) return std::nullopt;
      i += 1 + digits;
      continue;
    }
    append_utf8(out, byte);
  }
  return out;
}

}  // namespace attnscope
