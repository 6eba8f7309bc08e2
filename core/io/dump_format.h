// The file formats attnscope reads dumps from, told apart by their first bytes (never by the
// file name): HDF5 (schema 1), zip archives (torch.save's .pt and numpy's .npz) and
// .safetensors; and the error for a file that is none of them, naming what it looks like.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/result.h"

namespace attnscope {

enum class DumpFormat { hdf5, pt, npz, safetensors };

// "hdf5", "pt", "npz", "safetensors" (DumpListing::format).
const char* dump_format_name(DumpFormat format);
// "HDF5", "torch.save (.pt)", "numpy .npz", "safetensors": for messages.
const char* dump_format_label(DumpFormat format);

// What the first bytes say. HDF5 also covers files whose signature is not at offset 0 (a user
// block) and anything unknown: the HDF5 open then refuses it (unknown_format_error).
enum class Container { hdf5, zip, safetensors };

// Reads at most the first 16 bytes: "PK\3\4" (or an empty archive's "PK\5\6") -> zip; an
// 8-byte little-endian header length n >= 2 followed by '{' -> safetensors (its reader checks
// n against the file); else hdf5 (no HDF5 file has '{' at byte 8).
Container sniff_container(const uint8_t* head, size_t size);
// The same for a file on disk (reads its first bytes, never blocking; hdf5 when it cannot be
// read or is not a regular file).
Container sniff_file(const std::string& path);

// "NAME: not an HDF5 file, nor a .pt / .npz zip archive or a .safetensors file" with what the
// bytes look like when attnscope knows (a legacy torch.save pickle, a single .npy array) and a
// hint naming the formats attnscope reads.
Error unknown_format_error(const std::string& name, const uint8_t* head, size_t size);

}  // namespace attnscope
