// The text arguments of pickle protocol 0's opcodes, which protocol 1 still uses for booleans
// (INT "01" / "00"): one line each, parsed strictly (internal to core/io, for
// pickle_machine.cpp). Each returns nullopt when the line is not what the opcode writes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace attnscope {

// INT: "00" (False) and "01" (True) as booleans, else a decimal integer that fits 64 bits.
struct TextInteger {
  int64_t value = 0;
  bool boolean = false;
};
std::optional<TextInteger> parse_pickle_int(const std::string& line);

// LONG: a decimal integer with an optional trailing 'L' ("12L"), within 64 bits.
std::optional<int64_t> parse_pickle_long(const std::string& line);

// FLOAT: repr() of a float ("0.5", "1e-05", "inf", "nan").
std::optional<double> parse_pickle_float(const std::string& line);

// STRING: a quoted Python 2 str repr ('abc' or "abc") with backslash escapes (\\, \', \", \n,
// \r, \t, \xHH); the bytes it holds.
std::optional<std::string> parse_pickle_string(const std::string& line);

// UNICODE: raw-unicode-escape text (\uXXXX, \UXXXXXXXX; every other byte is a Latin-1
// character), as UTF-8.
std::optional<std::string> parse_pickle_unicode(const std::string& line);

}  // namespace attnscope
