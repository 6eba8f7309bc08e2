// Option values and inputs shared by the analysis commands: precision / mode / mask-fill /
// number / scale-range parsing, FILE::CASE references, and opening dumps and cases with
// messages that name the file, the case and a hint (exit code 2 on failure).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli_common.h"
#include "core/analysis/case_analysis.h"
#include "core/io/hdf5_dump.h"

namespace attnscope {

std::optional<Precision> parse_precision_option(const std::string& text);  // fp16|bf16|fp32
// recorded (empty: the replay's) | fused | unfused | upcast (fused, with AnalysisSettings::upcast)
// | both.
std::optional<std::vector<Mode>> parse_modes(const std::string& text);
std::optional<MaskFill> parse_mask_fill(
    const std::string& text);  // inf|1e9|min|safe, or neg_inf|-inf|-1e9|neg_1e9|finfo_min
std::optional<double> parse_positive(const std::string& text);
std::optional<int> parse_threads(const std::string& text);  // 1..1024

struct ScaleRange {
  double min = 0, max = 0;
  int points = 0;
};
std::optional<ScaleRange> parse_scales(const std::string& text);  // "MIN:MAX:N"

// "FILE::CASE" -> (FILE, CASE); no "::" -> (text, "").
std::pair<std::string, std::string> split_case_ref(const std::string& text);

// Prints "attnscope-cli COMMAND: message" (+ hint) to stderr and returns kExitUnreadable.
int fail(const std::string& command, const std::string& message, const std::string& hint = "");

// "FILE::CASE: message" for a failure of one case; just `message` when it already starts with
// "FILE: " (reader errors name the file and the dataset themselves).
std::string case_error_text(const std::string& file, const std::string& case_path,
                            const std::string& message);

// fail(), returning false (for option validation).
bool reject(const std::string& command, const std::string& message, const std::string& hint);

// Opens FILE in the probe (a crash or hang on a hostile file stays there).
Result<DumpReader> try_open_dump(const std::string& file, bool allow_external);
// try_open_dump; on failure prints the reader's message and hint.
std::optional<DumpReader> open_dump(const std::string& command, const std::string& file,
                                    bool allow_external);

// True when `pattern` (select_cases' --case: empty, a glob, or one path) names case `path`.
bool pattern_names(const std::string& pattern, const std::string& path);

// Prints each broken case (data unreadable, DumpReader::broken) that `pattern` names (as in
// select_cases; every one when empty) as "skipped /case, its data cannot be read: ERROR" with
// its hint; returns them. With `seen`, only cases not in it, which are added to it.
std::vector<const BrokenCase*> report_broken(const std::string& command, const DumpReader& dump,
                                             const std::string& pattern,
                                             std::set<std::string>* seen = nullptr);

// A group that looked like a case but was refused (DumpReader::rejected: bad shapes, ...) and
// the path its error names ("/step_0/layer_1/k"; the file when it names none).
struct RejectedGroup {
  std::string path;
  const Error* error = nullptr;
};
// Prints each rejected group whose path `pattern` names (every one when empty) as "skipped
// PATH, it cannot be read as a case: ERROR" with its hint; returns them. With `seen`, only
// paths not in it, which are added to it.
std::vector<RejectedGroup> report_rejected(const std::string& command, const DumpReader& dump,
                                           const std::string& pattern,
                                           std::set<std::string>* seen = nullptr);

// The canonical path of a case of the dump ("x" -> "/x"); on failure prints the file, the case
// and the available cases.
std::optional<std::string> find_case(const std::string& command, const DumpReader& dump,
                                     const std::string& case_path);
// find_case, then loads it.
std::optional<CaseData> load_case(const std::string& command, const DumpReader& dump,
                                  const std::string& case_path);

// The cases `pattern` names, in file order: all when empty, the fnmatch matches when it
// holds a wildcard, else the one exact case; nullopt (after printing) when it names none.
std::optional<std::vector<const CaseInfo*>> select_cases(const std::string& command,
                                                         const DumpReader& dump,
                                                         const std::string& pattern);

// Reads the shared what-if options (--precision fp32|fp16|bf16|recorded, --scale, --mask-fill)
// into `run`; false after printing the problem.
bool read_run_settings(const CommandArgs& args, const std::string& command, RunChoice& run);

// --mode into s.modes / s.upcast (absent: the replay of the recorded run); `one_mode` refuses
// "both". False after printing the problem.
bool read_mode_option(const CommandArgs& args, const std::string& command, bool one_mode,
                      AnalysisSettings& s);

// The index option --NAME (0 when absent) checked against [0, size); nullopt after printing the
// problem.
std::optional<int64_t> read_index(const CommandArgs& args, const std::string& command,
                                  const char* name, int64_t size);

// The one FILE::CASE positional of matrix / sweep, opened and loaded.
struct LoadedCase {
  std::optional<DumpReader> dump;
  std::optional<CaseData> data;
};
std::optional<LoadedCase> load_case_ref(const CommandArgs& args, const std::string& command);

}  // namespace attnscope
