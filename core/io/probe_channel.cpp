// ProbeChannel: the line / payload state machine over the probe's stdout (see probe_channel.h).
#include "core/io/probe_channel.h"

#include <algorithm>

#include "core/io/dump_probe.h"

namespace attnscope {

void ProbeChannel::feed(const char* data, size_t size) {
  size_t i = 0;
  while (i < size) {
    if (payload_left_ > 0) {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(payload_left_, size - i));
      listing_payload.append(data + i, take);
      payload_left_ -= take;
      i += take;
      continue;
    }
    const char c = data[i++];
    if (c != '\n') {
      if (partial_.size() < kMaxLine) partial_ += c;
      continue;
    }
    line(partial_);
    partial_.clear();
  }
}

void ProbeChannel::line(const std::string& text) {
  const size_t space = text.find(' ');
  const std::string key = text.substr(0, space);
  const std::string value = space == std::string::npos ? "" : text.substr(space + 1);
  if (key == kProbeCheckingLine) {
    checking = value;
    reading.clear();
  }
  if (key == kProbeReadingLine) reading = value;
  if (key == kProbeErrorLine) error = value;
  if (key == kProbeHintLine) hint = value;
  if (key == kProbeListingLine && !listing_header) {
    Result<ListingHeader> header = parse_listing_header(value);
    if (!header) {
      listing_problem = header.error().message;
      return;
    }
    listing_header = *header;
    listing_payload.reserve(static_cast<size_t>(std::min<uint64_t>(header->bytes, 64 << 20)));
    payload_left_ = header->bytes;
  }
}

}  // namespace attnscope
