// Telling dump formats apart by their first bytes (see dump_format.h).
#include "core/io/dump_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace attnscope {

const char* dump_format_name(DumpFormat format) {
  switch (format) {
    case DumpFormat::hdf5:
      return "hdf5";
    case DumpFormat::pt:
      return "pt";
    case DumpFormat::npz:
      return "npz";
    case DumpFormat::safetensors:
      return "safetensors";
  }
  return "unknown";
}

const char* dump_format_label(DumpFormat format) {
  switch (format) {
    case DumpFormat::hdf5:
      return "HDF5";
    case DumpFormat::pt:
      return "torch.save (.pt)";
    case DumpFormat::npz:
      return "numpy .npz";
    case DumpFormat::safetensors:
      return "safetensors";
  }
  return "unknown";
}

Container sniff_container(const uint8_t* head, size_t size) {
  if (size >= 4 && head[0] == 'P' && head[1] == 'K' &&
      ((head[2] == 3 && head[3] == 4) || (head[2] == 5 && head[3] == 6))) {
    return Container::zip;
  }
  if (size >= 9) {
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | head[i];
    if (header >= 2 && head[8] == '{') return Container::safetensors;
  }
  return Container::hdf5;
}

Container sniff_file(const std::string& path) {
  // O_NONBLOCK and the regular-file check: a named pipe must never block the sniffing.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Container::hdf5;
  struct stat st {};
  uint8_t head[16] = {0};
  ssize_t got = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) got = ::read(fd, head, sizeof head);
  ::close(fd);
  return sniff_container(head, got > 0 ? static_cast<size_t>(got) : 0);
}

Error unknown_format_error(const std::string& name, const uint8_t* head, size_t size) {
  std::string seen;
  if (size >= 2 && head[0] == 0x80 && head[1] <= 5) {
    seen = " (it is a bare pickle stream: torch.save's legacy format, or pickle.dump)";
  } else if (size >= 6 && std::memcmp(head, "\x93NUMPY", 6) == 0) {
    seen = " (it is a single .npy array, written by numpy.save)";
  } else if (size == 0) {
    seen = " (the file is empty)";
  }
  return make_error(ErrorCode::format,
                    name +
                        ": not an HDF5 file (no HDF5 signature), nor a .pt / .npz zip archive "
                        "or a .safetensors file" +
                        seen,
                    "attnscope reads HDF5 dumps (schema 1, written by h5py or the "
                    "attnscope_record hook), torch.save files (zip format, the default since "
                    "torch 1.6), numpy.savez / savez_compressed archives and safetensors files "
                    "holding a dict of tensors q, k, v, ...");
}

}  // namespace attnscope
