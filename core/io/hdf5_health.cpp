// read_health_table: the /health blocks of an HDF5 dump (attnscope_record's stats.py writes
// them: float32 [rows, columns] contiguous datasets with attributes `columns` and `calls`), or of
// every rank file of a run folder. Metadata is checked before any data is read.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/io/hdf5_common.h"
#include "core/io/health_reader.h"
#include "core/io/run_folder.h"

namespace attnscope {
namespace {

constexpr const char* kHealthGroup = "/health";
// Rows of one block at most, 64 MiB at 16 columns (a block holds a few seconds of training).
constexpr int64_t kMaxBlockRows = int64_t{1} << 20;
constexpr const char* kRecorderHint =
    "the statistics are written by attnscope_record's Recorder(stats=True); re-record, or "
    "drop the /health group to read the cases alone";

Error block_error(const std::string& file, const std::string& object, const std::string& problem,
                  const std::string& hint = kRecorderHint) {
  return h5::dataset_error(ErrorCode::format, file, object, problem, hint);
}

// Column index in the block of each HealthStat (-1: absent, read as NaN), from `columns`.
Result<std::vector<int>> column_positions(const std::string& columns, int64_t width,
                                          const std::string& file, const std::string& object) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= columns.size()) {
    const size_t end = std::min(columns.find(',', start), columns.size());
    names.push_back(columns.substr(start, end - start));
    start = end + 1;
  }
  if (static_cast<int64_t>(names.size()) != width || names.front() != "head") {
    return block_error(file, object,
                       "attribute `columns` names " + std::to_string(names.size()) +
                           " columns starting with '" + names.front() + "', the data has " +
                           std::to_string(width) + " (the first must be 'head')");
  }
  std::vector<int> at(kHealthStats, -1);
  for (int s = 0; s < kHealthStats; ++s) {
    const auto found =
        std::find(names.begin(), names.end(), health_stat_name(static_cast<HealthStat>(s)));
    if (found != names.end()) at[s] = static_cast<int>(found - names.begin());
  }
  return at;
}

std::string text_of(const nlohmann::json& call, const char* key) {
  const auto found = call.find(key);
  return found != call.end() && found->is_string() ? found->get<std::string>() : "";
}

Result<HealthCall> call_of(const nlohmann::json& j, const std::string& file,
                           const std::string& object, size_t index) {
  const std::string where = "call " + std::to_string(index) + " of attribute `calls`";
  if (!j.is_object()) return block_error(file, object, where + " is not an object");
  HealthCall c;
  for (auto [key, field] : {std::pair{"step", &c.step},
                            {"micro_batch", &c.micro_batch},
                            {"layer", &c.layer},
                            {"heads", &c.heads},
                            {"kv_heads", &c.kv_heads},
                            {"seqlen_q", &c.seqlen_q},
                            {"seqlen_k", &c.seqlen_k},
                            {"rows", &c.rows}}) {
    const auto found = j.find(key);
    if (found == j.end() || !found->is_number_integer() || found->get<int64_t>() < 0) {
      return block_error(file, object, where + " has no integer `" + key + "` >= 0");
    }
    *field = found->get<int64_t>();
  }
  if (c.heads < 1 || c.heads > 65536) {
    return block_error(file, object, where + " has " + std::to_string(c.heads) + " heads");
  }
  const auto scale = j.find("scale");
  c.scale = scale != j.end() && scale->is_number() ? scale->get<double>() : 0.0;
  c.name = text_of(j, "name");
  c.backend = text_of(j, "backend");
  c.dtype = text_of(j, "dtype");
  c.autocast_dtype = text_of(j, "autocast_dtype");
  c.device = text_of(j, "device");
  return c;
}

// Appends one block (dataset `object`, open as `dataset`) to `out`.
Status read_block(hid_t dataset, const std::string& file, const std::string& object, int rank,
                  HealthTable& out) {
  bool risky = true;
  if (auto e = h5::check_storage(dataset, OpenOptions{}, file, object, &risky)) return *e;
  if (risky) {
    return block_error(file, object, "is chunked, virtual or external, not contiguous");
  }
  h5::Handle type = h5::type_handle(H5Dget_type(dataset));
  if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4) {
    return block_error(file, object, "is not float32");
  }
  h5::Handle space = h5::space_handle(H5Dget_space(dataset));
  hsize_t dims[2] = {0, 0};
  if (H5Sget_simple_extent_ndims(space.get()) != 2 ||
      H5Sget_simple_extent_dims(space.get(), dims, nullptr) != 2) {
    return block_error(file, object, "is not a 2-D table [rows, columns]");
  }
  if (dims[0] > static_cast<hsize_t>(kMaxBlockRows) || dims[1] < 1 || dims[1] > 64) {
    return block_error(file, object,
                       "has " + std::to_string(dims[0]) + " x " + std::to_string(dims[1]) +
                           " values, beyond the " + std::to_string(kMaxBlockRows) +
                           " rows x 64 columns a block may hold");
  }
  Result<std::string> columns = h5::read_string_attribute(dataset, "columns", file + ": " + object);
  if (!columns) return columns.error();
  Result<std::vector<int>> at =
      column_positions(*columns, static_cast<int64_t>(dims[1]), file, object);
  if (!at) return at.error();
  Result<std::string> calls_text =
      h5::read_string_attribute(dataset, "calls", file + ": " + object);
  if (!calls_text) return calls_text.error();
  const nlohmann::json calls = nlohmann::json::parse(*calls_text, nullptr, false);
  if (!calls.is_array()) {
    return block_error(file, object, "attribute `calls` is not a JSON list");
  }
  std::vector<float> data(static_cast<size_t>(dims[0] * dims[1]));
  if (!data.empty() &&
      H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) < 0) {
    return h5::dataset_error(ErrorCode::io, file, object, "cannot be read",
                             "the file may be truncated or corrupt", true);
  }
  size_t row = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    Result<HealthCall> call = call_of(calls[i], file, object, i);
    if (!call) return call.error();
    if (row + static_cast<size_t>(call->heads) > dims[0]) {
      return block_error(file, object,
                         "attribute `calls` lists more heads than the " + std::to_string(dims[0]) +
                             " rows of the table");
    }
    call->rank = rank;
    call->first_head = out.heads.size();
    for (int64_t h = 0; h < call->heads; ++h, ++row) {
      const float* values = &data[row * dims[1]];
      if (values[0] != static_cast<float>(h)) {
        return block_error(file, object,
                           "row " + std::to_string(row) + " is head " + std::to_string(values[0]) +
                               ", its call's head " + std::to_string(h) + " was expected");
      }
      HealthHead head;
      for (int s = 0; s < kHealthStats; ++s) {
        head.values[s] = (*at)[s] < 0 ? NAN : values[(*at)[s]];
      }
      out.heads.push_back(head);
    }
    out.calls.push_back(std::move(*call));
  }
  if (row != dims[0]) {
    return block_error(
        file, object,
        "holds " + std::to_string(dims[0]) + " rows, its calls " + std::to_string(row));
  }
  return Ok{};
}

// Appends the blocks of one file.
Status read_file(const std::string& file, int rank, HealthTable& out) {
  return h5::with_file(file, [&](hid_t id) -> Status {
    if (h5::count_health_blocks(id) == 0) return Ok{};
    h5::Handle lapl = h5::link_access(OpenOptions{});
    std::optional<h5::OpenObject> group = h5::open_object(id, kHealthGroup, lapl.get());
    if (!group || group->kind != h5::ObjectKind::group) {
      return block_error(file, kHealthGroup, "is not a group");
    }
    std::vector<std::string> names;
    H5G_info_t info;
    if (H5Gget_info(group->handle.get(), &info) < 0) {
      return block_error(file, kHealthGroup, "cannot be listed: " + h5::error_detail());
    }
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      char name[64] = {0};
      if (H5Lget_name_by_idx(group->handle.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name,
                             sizeof name, H5P_DEFAULT) > 0) {
        names.push_back(name);
      }
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string object = h5::join_path(kHealthGroup, name);
      std::optional<h5::OpenObject> block =
          h5::open_object(group->handle.get(), name.c_str(), lapl.get());
      if (!block || block->kind != h5::ObjectKind::dataset) {
        return block_error(file, object, "is not a dataset");
      }
      if (Status read = read_block(block->handle.get(), file, object, rank, out); !read) {
        return read;
      }
    }
    return Ok{};
  });
}

}  // namespace

int64_t h5::count_health_blocks(hid_t file) {
  H5L_info_t link;
  if (H5Lexists(file, kHealthGroup, H5P_DEFAULT) <= 0 ||
      H5Lget_info(file, kHealthGroup, &link, H5P_DEFAULT) < 0 || link.type != H5L_TYPE_HARD) {
    h5::error_detail();
    return 0;
  }
  H5G_info_t info;
  if (H5Gget_info_by_name(file, kHealthGroup, &info, H5P_DEFAULT) < 0) {
    h5::error_detail();
    return 0;
  }
  return static_cast<int64_t>(info.nlinks);
}

Result<HealthTable> read_health_table(const std::string& path) {
  HealthTable out;
  if (!is_directory(path)) {
    out.files.push_back(path);
    if (Status read = read_file(path, -1, out); !read) return read.error();
    return out;
  }
  Result<RunFolderListing> listing = list_run_dumps(path);
  if (!listing) return listing.error();
  for (const RunDump& dump : order_run_dumps(listing->dumps)) {
    out.files.push_back(dump.path);
    if (Status read = read_file(dump.path, static_cast<int>(dump.rank), out); !read) {
      return read.error();
    }
  }
  return out;
}

}  // namespace attnscope
