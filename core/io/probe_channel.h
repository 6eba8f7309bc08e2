// The parent's side of the attnscope-probe channel (protocol in dump_probe.h): what the probe
// wrote on its stdout, parsed as bytes arrive. Lines are "KEY TEXT"; a "listing" line is
// followed by a payload of the size it declares (dump_listing.h), taken verbatim.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/io/dump_listing.h"

namespace attnscope {

class ProbeChannel {
 public:
  void feed(const char* data, size_t size);

  std::string checking;     // the case whose data is being read ("" between cases)
  std::string reading;      // the last dataset being read ("/case/q")
  std::string error, hint;  // a refusal or data error the probe reported
  // The listing header and payload, once a "listing" line arrived; `listing_problem` when its
  // header could not be parsed.
  std::optional<ListingHeader> listing_header;
  std::string listing_payload, listing_problem;
  // True while the payload is incomplete (the probe died or lied about its size).
  bool payload_pending() const { return payload_left_ > 0; }

 private:
  static constexpr size_t kMaxLine = 1 << 16;
  void line(const std::string& text);
  std::string partial_;
  uint64_t payload_left_ = 0;
};

}  // namespace attnscope
