#include "spmd/data/dataset_keys.hpp"

#include <algorithm>
#include <optional>
#include <iomanip>
#include <sstream>
#include <vector>

#include "spmd/data/element_type.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/data/h5_reader.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::data {

namespace {

enum class Kind { Features, Labels, Neither };

// What one dataset of the file looks like, from its metadata alone.
struct Entry {
  std::string name;  // absolute: "/train/x"
  std::vector<std::int64_t> shape;
  std::string dtype;
  Kind kind = Kind::Neither;
  std::int64_t rows() const { return shape.empty() ? -1 : shape[0]; }
};

// "/train/x" and "train/x" name the same dataset; keys are shown as users type them.
std::string without_root(const std::string& name) {
  const auto first = name.find_first_not_of('/');
  return first == std::string::npos ? std::string() : name.substr(first);
}
std::string absolute(const std::string& name) { return "/" + without_root(name); }

Entry examine(hid_t file, const std::string& name) {
  const std::string hint = "opening dataset '" + name + "' to see whether it holds features or labels";
  H5Dataset dataset(SPMD_CHECK_HDF5(H5Dopen2(file, name.c_str(), H5P_DEFAULT), hint.c_str()));
  Entry e;
  e.name = absolute(name);
  e.shape = dataset_dims(dataset.get());
  H5Datatype type(SPMD_CHECK_HDF5(H5Dget_type(dataset.get()), hint.c_str()));
  e.dtype = describe_hdf5_type(type.get());
  bool is_enum = false;
  const bool integer = label_type_of(type.get(), is_enum).has_value();
  const bool number = !is_enum && element_type_of(type.get()).has_value();
  // An integer [N, 1] is a label column, not features: counting it as both would make the
  // usual X [N, F] + y [N, 1] file ambiguous.
  if (integer && is_column(e.shape))
    e.kind = Kind::Labels;
  else if (number && e.shape.size() >= 2)
    e.kind = Kind::Features;
  return e;
}

const Entry* find(const std::vector<Entry>& entries, const std::string& name) {
  const auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == absolute(name); });
  return it == entries.end() ? nullptr : &*it;
}

// text(item) of every item, ", " between them.
template <class Items, class Text>
std::string joined(const Items& items, Text text) {
  std::string s;
  for (const auto& item : items) s += (s.empty() ? "" : ", ") + text(item);
  return s;
}

// "features/labels" of a pair of names.
constexpr auto pair_text = [](const auto& p) { return std::string(p.first) + "/" + p.second; };

std::string conventional_list() { return joined(kConventionalKeyPairs, pair_text); }

// Beyond this many datasets the listing stops and points to `spmd data info`.
constexpr std::size_t kMaxListed = 40;

std::string datasets_listing(const std::string& path, const std::vector<Entry>& entries) {
  if (entries.empty()) return "The file holds no dataset.";
  std::size_t name_width = 4, dtype_width = 5, shape_width = 5;
  for (const auto& e : entries) {
    name_width = std::max(name_width, e.name.size());
    dtype_width = std::max(dtype_width, e.dtype.size());
    shape_width = std::max(shape_width, format_shape(e.shape).size());
  }
  std::ostringstream os;
  os << "Datasets in the file:";
  for (std::size_t i = 0; i < entries.size() && i < kMaxListed; ++i) {
    const auto& e = entries[i];
    os << "\n  " << std::left << std::setw(static_cast<int>(name_width)) << e.name << "  "
       << std::setw(static_cast<int>(dtype_width)) << e.dtype << "  " << std::setw(static_cast<int>(shape_width))
       << format_shape(e.shape) << "  "
       << (e.kind == Kind::Features ? "features-like" : e.kind == Kind::Labels ? "labels-like" : "-");
  }
  if (entries.size() > kMaxListed)
    os << "\n  ... and " << entries.size() - kMaxListed << " more (spmd data info '" << path << "' lists them all)";
  return os.str();
}

std::string rule_text() {
  return "Without these options spmd takes a conventional pair at the root (" + conventional_list() +
         "), else the only features-like ([N, ...] numbers) and labels-like ([N] or [N, 1] integers or bool) "
         "datasets with the same N.";
}

std::string source_of(const KeyChoice& choice) {
  return choice.given_by.empty() ? choice.option : choice.given_by + ", the default of " + choice.option;
}

// The given key names no dataset of the file.
Error missing_key(const std::string& path, const KeyChoice& choice, const std::string& role,
                  const std::vector<Entry>& entries) {
  return Error("'" + path + "' has no dataset '" + choice.name + "' (the " + role + ", from " + source_of(choice) +
               "). " + datasets_listing(path, entries) + "\nSet " + choice.option +
               " to one of them" + (choice.given_by.empty() ? ", or leave it out to have it detected." : "."));
}

// The pairs (features-like, labels-like) with the same N.
std::vector<std::pair<const Entry*, const Entry*>> candidate_pairs(const std::vector<Entry>& entries) {
  std::vector<std::pair<const Entry*, const Entry*>> pairs;
  for (const auto& f : entries)
    if (f.kind == Kind::Features)
      for (const auto& l : entries)
        if (l.kind == Kind::Labels && l.rows() == f.rows()) pairs.emplace_back(&f, &l);
  return pairs;
}

std::vector<const Entry*> of_kind(const std::vector<Entry>& entries, Kind kind, std::int64_t rows, const std::string& except) {
  std::vector<const Entry*> out;
  for (const auto& e : entries)
    if (e.kind == kind && e.rows() == rows && e.name != absolute(except)) out.push_back(&e);
  return out;
}

// Both keys left out: rules (a) and (b).
ResolvedKeys detect_both(hid_t file, const std::string& path, const KeyRequest& request, const std::vector<Entry>& entries) {
  std::vector<std::pair<std::string, std::string>> conventional;
  for (const auto& [f, l] : kConventionalKeyPairs)
    if (dataset_exists(file, std::string("/") + f) && dataset_exists(file, std::string("/") + l)) conventional.emplace_back(f, l);
  ResolvedKeys r;
  r.features_detected = r.labels_detected = true;
  if (conventional.size() == 1) {
    r.keys = {conventional[0].first, conventional[0].second};
    r.rule = "conventional pair " + r.keys.features + "/" + r.keys.labels;
    return r;
  }
  std::string reason, example;
  const auto pairs = candidate_pairs(entries);
  if (conventional.size() > 1) {
    reason = "the root holds " + std::to_string(conventional.size()) + " conventional pairs (" +
             joined(conventional, pair_text) + ")";
    example = request.features.option + " " + conventional[0].first + " " + request.labels.option + " " +
              conventional[0].second;
  } else if (pairs.size() == 1) {
    r.keys = {without_root(pairs[0].first->name), without_root(pairs[0].second->name)};
    r.rule = "the only features-like and labels-like datasets with the same N";
    return r;
  } else {
    reason = "no conventional pair (" + conventional_list() + ") and ";
    const auto none = [&](Kind kind) {
      return std::none_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.kind == kind; });
    };
    if (none(Kind::Features))
      reason += "no features-like dataset";
    else if (none(Kind::Labels))
      reason += "no labels-like dataset";
    else if (pairs.empty())
      reason += "no labels-like dataset with the N of a features-like one";
    else {
      reason += std::to_string(pairs.size()) + " features-like/labels-like pairs with the same N (" +
                joined(pairs, [](const auto& p) { return p.first->name + " + " + p.second->name; }) + ")";
    }
    if (!pairs.empty())
      example = request.features.option + " " + without_root(pairs[0].first->name) + " " + request.labels.option + " " +
                without_root(pairs[0].second->name);
  }
  throw Error("'" + path + "': cannot tell which datasets hold the features and the labels: " + reason + ". " +
              datasets_listing(path, entries) + "\nSet " + request.features.option + " and " + request.labels.option +
              (example.empty() ? std::string() : " (e.g. " + example + ")") + ". " + rule_text());
}

// One key given (known to exist): its partner in a conventional pair of the same group,
// else the only dataset of the other kind with its N.
void detect_partner(hid_t file, const std::string& path, const KeyChoice& given, const KeyChoice& wanted,
                    bool wanted_is_labels, const std::vector<Entry>& entries, std::string& out, std::string& rule) {
  const auto slash = given.name.rfind('/');
  const std::string group = slash == std::string::npos ? std::string() : given.name.substr(0, slash + 1);
  const std::string base = given.name.substr(group.size());
  std::vector<std::pair<std::string, std::string>> partners;  // (name, pair)
  for (const auto& [f, l] : kConventionalKeyPairs) {
    const std::string mine = wanted_is_labels ? f : l, other = wanted_is_labels ? l : f;
    if (base == mine && dataset_exists(file, group + other) &&
        std::none_of(partners.begin(), partners.end(), [&](const auto& p) { return p.first == group + other; }))
      partners.emplace_back(group + other, std::string(f) + "/" + l);
  }
  if (partners.size() == 1) {
    out = partners[0].first;
    rule = "partner of '" + given.name + "' in the conventional pair " + partners[0].second;
    return;
  }
  const Entry& known = *find(entries, given.name);
  const Kind kind = wanted_is_labels ? Kind::Labels : Kind::Features;
  const std::string role = wanted_is_labels ? "labels" : "features";
  const auto matches = of_kind(entries, kind, known.rows(), given.name);
  if (matches.size() == 1) {
    out = without_root(matches[0]->name);
    rule = "the only " + role + "-like dataset with the " + std::to_string(known.rows()) + " rows of '" + given.name + "'";
    return;
  }
  const std::string rows = known.rows() < 0 ? "rows (it is a scalar)" : std::to_string(known.rows()) + " rows";
  const std::string reason = matches.empty() ? "no " + role + "-like dataset has its " + rows
                                             : std::to_string(matches.size()) + " " + role + "-like datasets have its " +
                                                   rows + " (" + joined(matches, [](const Entry* e) { return e->name; }) + ")";
  throw Error("'" + path + "': cannot tell which dataset holds the " + role + " for " +
              (wanted_is_labels ? "features" : "labels") + " '" + given.name + "' " + format_shape(known.shape) +
              " (from " + source_of(given) + "): " + reason + ". " + datasets_listing(path, entries) + "\nSet " +
              wanted.option + (matches.empty() ? "" : " (e.g. " + wanted.option + " " + without_root(matches[0]->name) + ")") +
              ". " + rule_text());
}

}  // namespace

std::string ResolvedKeys::describe() const {
  const auto how = [&](bool detected) { return detected ? "auto" : "given"; };
  if (features_detected == labels_detected)
    return "features '" + keys.features + "', labels '" + keys.labels + "' (" + how(features_detected) +
           (features_detected ? ": " + rule : std::string()) + ")";
  return "features '" + keys.features + "' (" + how(features_detected) + (features_detected ? ": " + rule : "") +
         "), labels '" + keys.labels + "' (" + how(labels_detected) + (labels_detected ? ": " + rule : "") + ")";
}

nlohmann::json to_json(const ResolvedKeys& r) {
  return {{"features", r.keys.features}, {"labels", r.keys.labels}, {"features_auto", r.features_detected},
          {"labels_auto", r.labels_detected}, {"rule", r.rule}};
}

ResolvedKeys resolved_keys_from_json(const nlohmann::json& j) {
  ResolvedKeys r;
  r.keys = {j.at("features").get<std::string>(), j.at("labels").get<std::string>()};
  r.features_detected = j.at("features_auto").get<bool>();
  r.labels_detected = j.at("labels_auto").get<bool>();
  r.rule = j.at("rule").get<std::string>();
  return r;
}

namespace {
// An AnnData file's categorical obs columns ("obs/cell_type"), for the messages that ask for one.
std::string anndata_label_columns(hid_t file) {
  std::string list;
  for (const auto& name : list_datasets(file)) {
    const std::string suffix = "/codes";
    if (name.rfind("/obs/", 0) == 0 && name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      list += (list.empty() ? "" : ", ") + name.substr(1, name.size() - 1 - suffix.size());
  }
  return list.empty() ? "" : " (its categorical columns: " + list + ")";
}

// Keys that name groups (a sparse matrix's, an AnnData categorical column's) are the sparse
// loaders' to check: both must be given. Returns nothing when neither key is a group and
// the file is not AnnData's with keys to find.
std::optional<ResolvedKeys> resolve_group_keys(const std::string& path, const KeyRequest& request) {
  const H5Reader in(path, "the features and labels");
  const auto is_group = [&](const std::string& name) { return !name.empty() && !in.has_dataset(name) && in.has_group(name); };
  const KeyChoice& f = request.features;
  const KeyChoice& l = request.labels;
  const bool anndata = in.has_attribute("/", "encoding-type") &&
                       in.attribute("/", "encoding-type").kind == AttributeValue::Kind::Text &&
                       in.attribute("/", "encoding-type").text == "anndata";
  if (!is_group(f.name) && !is_group(l.name) && !(anndata && (f.name.empty() || l.name.empty()))) return std::nullopt;
  if (f.name.empty() || l.name.empty()) {
    std::string ask;
    if (f.name.empty()) ask = "set " + f.option + (anndata ? " (AnnData's matrix is X)" : "");
    if (l.name.empty()) ask += (ask.empty() ? "set " : " and ") + l.option + anndata_label_columns(in.file());
    throw Error("'" + path + "'" + (anndata ? " is an AnnData file" : "") + ": " + ask +
                "; a sparse matrix and a label column are not found by name");
  }
  ResolvedKeys r;
  r.keys = {f.name, l.name};
  return r;
}
}  // namespace

ResolvedKeys resolve_dataset_keys(const std::string& path, const KeyRequest& request) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  if (auto groups = resolve_group_keys(path, request)) return *groups;
  H5File file = open_file_serial(path, "the features and labels");
  std::vector<Entry> entries;
  for (const auto& name : list_datasets(file.get())) entries.push_back(examine(file.get(), name));
  const KeyChoice& f = request.features;
  const KeyChoice& l = request.labels;
  // A given key may name a dataset by another of its names (a soft link to it, listed once).
  for (const KeyChoice* given : {&f, &l})
    if (!given->name.empty() && !find(entries, given->name) && dataset_exists(file.get(), given->name))
      entries.push_back(examine(file.get(), given->name));
  // Links that lead nowhere are listed (as neither kind), so that a file that seems to hold
  // nothing says why.
  for (const auto& b : broken_links(file.get())) entries.push_back({b.name, {}, b.target + ", which is missing", Kind::Neither});
  if (!f.name.empty() && !find(entries, f.name)) throw missing_key(path, f, "features", entries);
  if (!l.name.empty() && !find(entries, l.name)) throw missing_key(path, l, "labels", entries);
  if (f.name.empty() && l.name.empty()) return detect_both(file.get(), path, request, entries);
  ResolvedKeys r;
  r.keys = {f.name, l.name};
  if (f.name.empty()) {
    r.features_detected = true;
    detect_partner(file.get(), path, l, f, false, entries, r.keys.features, r.rule);
  } else if (l.name.empty()) {
    r.labels_detected = true;
    detect_partner(file.get(), path, f, l, true, entries, r.keys.labels, r.rule);
  }
  return r;
}

ResolvedKeys resolve_dataset_keys(const runtime::Context& ctx, const std::string& path, const KeyRequest& request) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  // One rank reads the metadata; the others take its answer, so they cannot disagree.
  std::string answer;
  runtime::agree_on(ctx.comm(), [&] {
    if (ctx.is_root()) answer = to_json(resolve_dataset_keys(path, request)).dump();
  });
  runtime::broadcast(ctx, answer);
  return resolved_keys_from_json(nlohmann::json::parse(answer));
}

}  // namespace spmd::data
