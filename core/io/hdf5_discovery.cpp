// Lazy case discovery: a recursive walk over the group tree that reads only metadata (links,
// attributes, dataset types and extents), with a visited set so soft-link and hard-link cycles
// end, and external links refused unless allowed: by link type here, and inside the library
// (link_access) wherever a soft link leads through one.
#include <map>
#include <set>

#include "core/io/hdf5_common.h"

namespace attnscope::h5 {

namespace {

constexpr int kMaxDepth = 64;

struct Link {
  std::string name;
  H5L_type_t type;
};

herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* out) {
  static_cast<std::vector<Link>*>(out)->push_back({name, info->type});
  return 0;
}

// "file 'other.h5', object '/x'" for an external link, for messages.
std::string external_target(hid_t group, const std::string& name) {
  H5L_info_t info;
  if (H5Lget_info(group, name.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_EXTERNAL) {
    error_detail();
    return "a user-defined link";
  }
  std::vector<char> value(info.u.val_size + 1, '\0');
  const char* file = nullptr;
  const char* object = nullptr;
  unsigned flags = 0;
  if (H5Lget_val(group, name.c_str(), value.data(), value.size(), H5P_DEFAULT) < 0 ||
      H5Lunpack_elink_val(value.data(), info.u.val_size, &flags, &file, &object) < 0) {
    error_detail();
    return "an external file";
  }
  return std::string("file '") + file + "', object '" + object + "'";
}

// A tensor dataset of a candidate case, opened once during the walk.
struct TensorLink {
  std::string link;  // name in the group ("dout")
  Handle dataset;
};

class Walker {
 public:
  Walker(const std::string& file_name, const OpenOptions& options)
      : file_name_(file_name), options_(options), lapl_(link_access(options)) {}

  Discovery run(hid_t file) {
    if (auto root = open_object(file, ".", lapl_.get())) visited_.insert(root->key);
    visit_group(file, "/", 0);
    sort_cases(out_.cases);
    return std::move(out_);
  }

 private:
  Error object_error(ErrorCode code, const std::string& object, const std::string& problem,
                     const std::string& hint) {
    return dataset_error(code, file_name_, object, problem, hint);
  }

  void visit_group(hid_t group, const std::string& path, int depth) {
    std::vector<Link> links;
    if (H5Literate(group, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect_link, &links) < 0) {
      out_.rejected.push_back(object_error(ErrorCode::format, path, "cannot list the group",
                                           "the file may be corrupt"));
      error_detail();
      return;
    }
    std::map<std::string, TensorLink> tensors;  // canonical name -> dataset
    std::optional<Error> problem;               // first problem with a tensor link
    for (const Link& link : links) {
      const std::string object = join_path(path, link.name);
      const char* canonical = canonical_tensor_name(link.name);
      const bool followable =
          link.type == H5L_TYPE_HARD || link.type == H5L_TYPE_SOFT || options_.allow_external;
      if (!followable) {
        Error e = object_error(
            ErrorCode::unsupported, object,
            "external link to " + external_target(group, link.name) + " is not followed",
            kAllowExternalHint);
        if (canonical != nullptr && !problem) problem = e;
        if (canonical == nullptr) out_.rejected.push_back(e);
        continue;
      }
      std::optional<OpenObject> opened = open_object(group, link.name.c_str(), lapl_.get());
      if (!opened) {
        const std::string refused = take_refused_external();
        if (!refused.empty()) {
          Error e = object_error(
              ErrorCode::unsupported, object,
              "soft link leads through an external link to " + refused + ", which is not followed",
              kAllowExternalHint);
          if (canonical != nullptr && !problem) problem = e;
          if (canonical == nullptr) out_.rejected.push_back(e);
        } else if (canonical != nullptr && !problem) {
          problem = object_error(ErrorCode::format, object, "link does not resolve to an object",
                                 "the link dangles or its target cannot be opened");
        }
        continue;
      }
      if (opened->kind == ObjectKind::group) {
        // Depth first, at once: only the groups on the path down stay open (a group of a
        // million cases never holds a million handles). A group reached again (hard link,
        // soft link, cycle) is skipped.
        visit_subgroup(std::move(*opened), join_path(path, link.name), depth);
        continue;
      }
      if (opened->kind != ObjectKind::dataset || canonical == nullptr) continue;
      auto [it, inserted] =
          tensors.emplace(canonical, TensorLink{link.name, std::move(opened->handle)});
      if (!inserted && !problem) {
        problem = object_error(
            ErrorCode::format, object,
            "both '" + it->second.link + "' and '" + link.name + "' give tensor " + canonical,
            "keep one of the aliases");
      }
    }
    if (tensors.count("q") || tensors.count("k") || tensors.count("v") || problem) {
      add_case(group, path, tensors, problem);
    }
  }

  void visit_subgroup(OpenObject child, const std::string& child_path, int depth) {
    if (!visited_.insert(child.key).second) return;
    if (depth + 1 > kMaxDepth) {
      out_.rejected.push_back(object_error(ErrorCode::unsupported, child_path,
                                           "groups nested deeper than 64 levels",
                                           "flatten the dump's group tree"));
      return;
    }
    visit_group(child.handle.get(), child_path, depth + 1);
  }

  void add_case(hid_t group, const std::string& path,
                const std::map<std::string, TensorLink>& tensors,
                const std::optional<Error>& problem) {
    if (problem) {
      out_.rejected.push_back(*problem);
      return;
    }
    auto info = read_case(group, path, tensors);
    if (info) {
      out_.cases.push_back(std::move(*info));
    } else {
      out_.rejected.push_back(info.error());
    }
  }

  Result<CaseInfo> read_case(hid_t group, const std::string& path,
                             const std::map<std::string, TensorLink>& tensors) {
    const std::string where = file_name_ + ": " + path;
    CaseInfo info;
    info.path = path;
    auto config = read_case_config(group, where);
    if (!config) return config.error();
    info.config = std::move(*config);
    for (const char* name : kTensorNames) {
      auto it = tensors.find(name);
      if (it == tensors.end()) continue;
      const std::string object = join_path(path, it->second.link);
      auto meta = inspect_dataset(it->second.dataset.get(), name, options_, file_name_, object);
      if (!meta) return meta.error();
      if (meta->risky_read) out_.risky_reads.insert(object);
      info.tensors.push_back({name, it->second.link, meta->element.dtype, meta->shape});
    }
    auto dims = infer_case_dims(info.tensors, info.config.layout, where);
    if (!dims) return dims.error();
    info.dims = *dims;
    info.config.layout = case_layout(info.tensors, info.config.layout);
    return info;
  }

  const std::string& file_name_;
  const OpenOptions& options_;
  Handle lapl_;  // link_access(options_): every open of the walk
  std::set<ObjectKey> visited_;
  Discovery out_;
};

}  // namespace

Result<DatasetMeta> inspect_dataset(hid_t dataset, const std::string& name,
                                    const OpenOptions& options, const std::string& file,
                                    const std::string& object) {
  bool risky_read = true;
  if (auto e = check_storage(dataset, options, file, object, &risky_read)) return *e;
  std::string tag;
  if (H5Aexists(dataset, "dtype") > 0) {
    auto text = read_string_attribute(dataset, "dtype", file + ": " + object);
    if (text) tag = *text;
  }
  error_detail();
  Handle type = type_handle(H5Dget_type(dataset));
  if (!type) {
    return dataset_error(ErrorCode::format, file, object, "cannot read the element type",
                         "the file may be corrupt", true);
  }
  auto element = map_element_type(type.get(), name, tag, file, object);
  if (!element) return element.error();
  auto shape = read_extent(dataset, element->memory_size, options, file, object);
  if (!shape) return shape.error();
  DatasetMeta meta;
  meta.element = std::move(*element);
  meta.shape = std::move(*shape);
  meta.risky_read = risky_read;
  return meta;
}

Discovery discover_cases(hid_t file, const std::string& file_name, const OpenOptions& options) {
  return Walker(file_name, options).run(file);
}

}  // namespace attnscope::h5
