// Discovery of the formats whose tensors are read at a TensorLocation (internal to core/io):
// torch.save .pt (pt_reader.cpp), numpy .npz (npz_reader.cpp) and .safetensors
// (safetensors_reader.cpp). Each reads only metadata (the pickle, the .npy headers, the JSON
// header) plus single-element scalar tensors, and returns the file's listing: valid cases,
// rejected ones with the reason, and the location of every listed tensor. An Error refuses the
// whole file (a pickle calling code, a corrupt header, ...).
#pragma once

#include "core/io/byte_store.h"
#include "core/io/dump_listing.h"
#include "core/io/hdf5_dump.h"

namespace attnscope {

// A zip archive is a .pt when it holds "data.pkl" (at its root or in one top-level folder).
bool is_pt_archive(const ByteStore& zip);

Result<DumpListing> discover_pt(const ByteStore& zip, const OpenOptions& options);
Result<DumpListing> discover_npz(const ByteStore& zip, const OpenOptions& options);
Result<DumpListing> discover_safetensors(const ByteStore& file, const OpenOptions& options);

}  // namespace attnscope
