// Reading schema-1 attention dumps (DESIGN §2) from HDF5 and from the files users attach to
// bug reports (torch.save .pt, numpy .npz, .safetensors: dump_format.h), and writing them in
// HDF5. Files are opened read-only for reading and never modified; every failure is a Result
// naming the file, the dataset, the problem and a hint.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/case_model.h"
#include "core/io/dump_listing.h"
#include "core/result.h"

namespace attnscope {

struct OpenedSource;

// Schema version written as int attributes on the root group by DumpWriter and attnscope_record:
// major and minor (1.1 added the run semantics, DESIGN §2). Files without them (h5py exports,
// older attnscope) are read as schema 1; newer versions are read as far as schema 1.1 goes.
inline constexpr const char* kSchemaVersionAttribute = "attnscope_schema";
inline constexpr const char* kSchemaMinorAttribute = "attnscope_schema_minor";
inline constexpr int kSchemaVersion = 1;
inline constexpr int kSchemaMinor = 1;

// "1.10.8": the HDF5 library this build reads and writes with (for About boxes and reports).
std::string hdf5_library_version();

struct OpenOptions {
  bool allow_external = false;  // follow external links / external raw storage / virtual datasets
  int64_t max_tensor_bytes = int64_t{8} << 30;  // refuse any single dataset larger than this
};

// An open dump. Discovery reads only metadata (group names, attributes, dataset shapes and
// types; a .pt's pickle, an .npz's array headers, a .safetensors header); tensor data is read
// by load().
class DumpReader {
 public:
  // Picks the format from the file's first bytes (dump_format.h), not from its name. Fails
  // (format / unsupported / too_large / io) when the file cannot be read or holds no valid
  // case; the error is then the first rejected group's, or "no case ... found".
  static Result<DumpReader> open(const std::string& path, const OpenOptions& options = {});
  // The same from an in-memory file image (`name` stands for the file in messages); the bytes
  // are copied. Used by the fuzzer and by probes of untrusted data.
  static Result<DumpReader> open_image(const void* data, size_t size, const std::string& name,
                                       const OpenOptions& options = {});
  // Opens the file with the listing another process discovered (attnscope-probe), without
  // walking the file again; load() still re-checks each tensor's metadata against it. Fails
  // like open() when the file cannot be opened or the listing holds no readable case (the
  // first broken case's error, else the first rejected group's).
  static Result<DumpReader> open_listed(const std::string& path, DumpListing listing,
                                        const OpenOptions& options = {});
  DumpReader(DumpReader&&) noexcept;
  DumpReader& operator=(DumpReader&&) noexcept;
  ~DumpReader();

  const std::string& path() const;
  // dump_format_name() of the file: "hdf5", "pt", "npz", "safetensors".
  const std::string& format() const;
  // The file's kSchemaVersionAttribute, 0 when absent (unversioned schema 1).
  int schema_version() const;
  // Blocks of attention health statistics (/health, schema 1.2; core/io/health_reader.h). A
  // dump holding them and no case opens with no case. kHealthUnreadable when attnscope's probe
  // died reading them: never read them then; health_error() says why.
  int64_t health_blocks() const;
  const std::optional<Error>& health_error() const;
  // The rank of a multi-rank run that wrote the file (root attributes); -1 / "" when absent.
  const RankIdentity& rank_identity() const;
  // Cases ordered by (step, layer) attributes, else by the numbers in their group paths.
  const std::vector<CaseInfo>& cases() const;
  // Groups that looked like cases but were rejected (bad shapes, ...), with the reason.
  const std::vector<Error>& rejected() const;
  // Valid cases whose data could not be read (found by the probe); not in cases(), and load()
  // of one returns its error.
  const std::vector<BrokenCase>& broken() const;
  // The listing this reader holds (what attnscope-probe hands to its parent).
  DumpListing listing() const;
  // The same, moved out without a copy (a million cases' listing is a gigabyte): cases(),
  // rejected() and broken() are empty afterwards, check_case() still reads.
  DumpListing take_listing();

  // Reads one case (by group path, "/step_1/layer_0"; the leading '/' may be omitted) into
  // canonical layout. Fails (too_large) before reading when its tensors need more than the
  // memory budget (core/memory_budget.h). Safe to call from several threads (HDF5 calls and
  // zip reads are serialised).
  Result<CaseData> load(const std::string& case_path) const;
  // load() calls made so far on this reader (how often cases were read).
  size_t loads() const;
  // While the returned token lives, the dump's file stays open between reads, so reading many
  // of its cases opens it once (an HDF5 file of 100k cases costs O(cases) per open). Without
  // one, each read opens the file and closes it after, so the process may write the file in
  // between (issue 21). A file that changed on disk is reopened either way. Tokens nest.
  [[nodiscard]] std::shared_ptr<void> keep_open() const;

  // Test reads of the stored data of every case, without keeping it (the probe, issue 7): a
  // tensor of at most `sample_bytes` is read whole, a larger one has its chunk index walked
  // and its first and last chunk read (contiguous: its first and last elements), each read
  // capped at `sample_bytes`. In an HDF5 file only the datasets whose read goes beyond a plain
  // byte range of the file are test-read: chunked ones (a chunk index or a filter pipeline is
  // what can crash libhdf5) and, when allowed, external or virtual ones (another file, which
  // may block); a contiguous or compact dataset's read fails cleanly at load time if it must
  // (a dump of a million tiny cases is probed without a million more dataset opens). `on_dataset`
  // is called with "/case/q" before that dataset is read. Fails (format) at the first read that
  // fails, naming the file and the dataset.
  Status check_data(int64_t sample_bytes,
                    const std::function<void(const std::string&)>& on_dataset = {}) const;
  // The same test reads for one case of cases().
  Status check_case(const CaseInfo& info, int64_t sample_bytes,
                    const std::function<void(const std::string&)>& on_dataset = {}) const;

 private:
  struct State;
  explicit DumpReader(std::unique_ptr<State> state);
  // A reader over an opened source, or no_case_error when its listing holds no case.
  static Result<DumpReader> adopt(Result<OpenedSource> opened, const std::string& path);
  std::unique_ptr<State> state_;
};

// How bfloat16 tensors are stored: uint16 with attribute dtype="bfloat16", or a 2-byte
// opaque type whose tag is "bfloat16".
enum class Bf16Storage { uint16_with_attribute, opaque };

struct WriteOptions {
  Bf16Storage bf16 = Bf16Storage::uint16_with_attribute;
  int deflate_level = 4;  // 0 = no compression (chunked + shuffle + deflate otherwise)
};

// A scalar attribute written next to a case's schema attributes: text or a number.
using AttributeValue = std::variant<std::string, double>;

// Writes cases into a hidden temporary next to the target path; close() fsyncs it and renames
// it over the target (an existing file there is replaced only then). A writer destroyed
// without close(), or killed, leaves the previous file intact.
class DumpWriter {
 public:
  static Result<DumpWriter> create(const std::string& path, const WriteOptions& options = {});
  DumpWriter(DumpWriter&&) noexcept;
  DumpWriter& operator=(DumpWriter&&) noexcept;
  ~DumpWriter();

  // Writes `data` (canonical tensors) under `group_path` (intermediate groups created), in the
  // layout of data.info.config.layout, with every set attribute of data.info.config.
  Status write_case(const std::string& group_path, const CaseData& data);
  // Extra scalar attributes (strings as h5py writes `str`, numbers as float64) on the group of a
  // case written by write_case; fails when one of them already exists there.
  Status write_attributes(const std::string& group_path,
                          const std::vector<std::pair<std::string, AttributeValue>>& attributes);
  // An extra dataset `name` in the group of a case written by write_case, stored as given
  // (readers ignore names that are not schema-1 tensors, e.g. `m`).
  Status write_extra_dataset(const std::string& group_path, const std::string& name,
                             const HostTensor& t);
  // Where the content is written until close() renames it ("dir/.NAME.PID-N.tmp").
  const std::string& temp_path() const;
  Status close();

 private:
  struct State;
  explicit DumpWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace attnscope
