#include "spmd/data/describe.hpp"

#include "spmd/data/sparse_matrix.hpp"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <map>
#include <sstream>

#include "spmd/data/external_files.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/data/h5_reader.hpp"
#include "spmd/data/storage.hpp"
#include "spmd/runtime/check.hpp"

namespace spmd::data {

namespace {

template <class T>
std::string join(const std::vector<T>& values) {
  std::ostringstream os;
  os << std::setprecision(10);
  if (values.size() != 1) os << "[";
  for (std::size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  if (values.size() != 1) os << "]";
  return os.str();
}

template <class T>
nlohmann::json json_of(const std::vector<T>& values, bool scalar) {
  if (scalar && values.size() == 1) return values[0];
  return nlohmann::json(values);
}

std::vector<AttributeDescription> describe_attributes(const H5Reader& reader, const std::string& object) {
  std::vector<AttributeDescription> out;
  for (const auto& name : reader.attribute_names(object)) {
    const AttributeValue v = reader.attribute(object, name);
    AttributeDescription d{name, v.type_name, "", nullptr};
    const bool scalar = v.shape.empty();
    switch (v.kind) {
      case AttributeValue::Kind::Text:
        d.value = v.text;
        d.json = v.text;
        break;
      case AttributeValue::Kind::Integers:
        d.value = join(v.integers);
        d.json = json_of(v.integers, scalar);
        break;
      case AttributeValue::Kind::Floats:
        d.value = join(v.floats);
        d.json = json_of(v.floats, scalar);
        break;
      case AttributeValue::Kind::Other:
        d.value = "(" + v.type_name + ")";
        d.json = d.value;
        break;
    }
    out.push_back(std::move(d));
  }
  return out;
}

// A label column's histogram in bounded memory, read in pieces: values in [0, kDense) are
// counted in an array (the common case, and fast enough for 2^31 rows), others in a map
// that stops taking new values at kMaxTracked (ids as labels), after which `distinct` is a
// lower bound.
LabelHistogram histogram_of(const H5Reader& reader, const std::string& name) {
  constexpr std::int64_t kDense = 1 << 16, kMaxTracked = 1 << 20;
  std::vector<std::int64_t> dense(kDense, 0);
  std::map<std::int64_t, std::int64_t> sparse;
  LabelHistogram h;
  bool any = false;
  reader.read_int64_pieces(name, std::int64_t{1} << 20, [&](std::span<const std::int64_t> values) {
    for (const std::int64_t v : values) {
      if (v >= 0 && v < kDense) {
        ++dense[static_cast<std::size_t>(v)];
      } else if (auto it = sparse.find(v); it != sparse.end()) {
        ++it->second;
      } else if (static_cast<std::int64_t>(sparse.size()) < kMaxTracked) {
        sparse.emplace(v, 1);
      } else {
        h.distinct_at_least = true;
      }
      h.min = any ? std::min(h.min, v) : v;
      h.max = any ? std::max(h.max, v) : v;
      any = true;
    }
  });
  for (std::int64_t v = 0; v < kDense; ++v)
    if (dense[static_cast<std::size_t>(v)] > 0) sparse.emplace(v, dense[static_cast<std::size_t>(v)]);
  h.distinct = static_cast<std::int64_t>(sparse.size());
  if (h.distinct <= kMaxHistogramValues && !h.distinct_at_least) h.counts.assign(sparse.begin(), sparse.end());
  return h;
}

std::string human_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream os;
  os << std::fixed << std::setprecision(u == 0 ? 0 : 1) << v << " " << units[u];
  return os.str();
}

constexpr std::int64_t kChunkCacheBytes = std::int64_t{1} << 20;  // HDF5's default chunk cache, per dataset
constexpr std::int64_t kStreamReadBytes = std::int64_t{16} << 20;  // eval streams 16 MiB of float32 rows a read

std::string join_dims(const std::vector<std::int64_t>& dims, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? sep : "") + std::to_string(dims[i]);
  return s;
}

std::string mib(std::int64_t bytes) {
  std::ostringstream os;
  os.precision(3);
  os << static_cast<double>(bytes) / static_cast<double>(kChunkCacheBytes) << " MiB";
  return os.str();
}

// Compressed chunks each holding many rows, more of them across a run of rows than HDF5's
// chunk cache holds: every read of a few rows decompresses the chunks it touches whole
// again. "" when the chunking reads fine.
std::string slow_chunking(const StorageInfo& storage, const std::vector<std::int64_t>& shape,
                          std::int64_t element_bytes, const std::string& path, const std::string& name) {
  if (storage.filters.empty() || shape.size() < 2 || shape[0] == 0) return "";
  std::int64_t row_elements = 1, row_chunks = 1, chunk_bytes = element_bytes;
  for (std::size_t i = 1; i < shape.size(); ++i) {
    row_elements *= shape[i];
    row_chunks *= (shape[i] + storage.chunk[i] - 1) / std::max<std::int64_t>(storage.chunk[i], 1);
  }
  for (auto c : storage.chunk) chunk_bytes *= c;
  const std::int64_t band_bytes = row_chunks * chunk_bytes;  // the chunks holding chunk[0] whole rows
  const std::int64_t read_rows = std::clamp<std::int64_t>(kStreamReadBytes / (4 * std::max<std::int64_t>(row_elements, 1)), 1, shape[0]);
  const std::int64_t chunk_rows = std::min(storage.chunk[0], shape[0]);
  if (band_bytes <= kChunkCacheBytes || chunk_rows < 2 * read_rows) return "";
  std::vector<std::int64_t> better = shape;
  better[0] = std::clamp<std::int64_t>(kChunkCacheBytes / std::max<std::int64_t>(row_elements * element_bytes, 1), 1, shape[0]);
  const std::string object = name.rfind('/', 0) == 0 ? name.substr(1) : name;
  return "slow to read by nature: each compressed chunk " + format_shape(storage.chunk) + " holds " +
         std::to_string(chunk_rows) + " rows" +
         (row_chunks > 1 ? " of a part of each row (" + std::to_string(row_chunks) + " chunks to a row)" : std::string()) +
         ", and the chunks of a run of rows (" + mib(band_bytes) +
         ") exceed HDF5's 1 MiB chunk cache, so every read of " + std::to_string(read_rows) +
         " rows (16 MiB of float32, what eval streams) decompresses about " +
         std::to_string((chunk_rows + read_rows - 1) / read_rows) +
         "x the rows it uses. Rechunk into whole rows: h5repack -l " + object + ":CHUNK=" + join_dims(better, "x") + " " +
         path + " rechunked.h5 (h5py: chunks=(" + join_dims(better, ", ") + "))";
}

// What `spmd data info` says of a features dataset's storage, beyond its layout line: chunks
// never written (and what they read as), and chunkings that make reading rows slow by
// nature, with the h5repack command that rechunks them.
std::vector<std::string> storage_notes(const StorageInfo& storage, const std::vector<std::int64_t>& shape,
                                       std::int64_t element_bytes, const std::string& path, const std::string& name) {
  std::vector<std::string> notes;
  if (storage.layout != "chunked" || storage.chunk.size() != shape.size()) return notes;
  if (storage.partly_written()) {
    std::ostringstream fill;
    fill << storage.fill_value;
    notes.push_back(std::to_string(storage.chunks_total - storage.chunks_written) + " of " +
                    std::to_string(storage.chunks_total) + " chunks never written: " +
                    (storage.fills_unwritten ? "their rows read as the fill value " + fill.str()
                                             : std::string("no fill value, so their rows have no values (refused "
                                                           "as features or labels)")));
  }
  if (const std::string slow = slow_chunking(storage, shape, element_bytes, path, name); !slow.empty())
    notes.push_back(slow);
  return notes;
}

// Where the values of a dataset with external storage are, or what keeps them from being read.
std::string external_note(const ExternalFiles& external) {
  if (external.files.empty()) return "";
  if (!external.complete()) return "values in external raw files, not all readable: " + external.problems();
  std::string names;
  for (const auto& f : external.files) names += (names.empty() ? "'" : ", '") + f.path + "'";
  return "values in external raw file" + std::string(external.files.size() > 1 ? "s " : " ") + names + " (found " +
         external.where + ")";
}

// "gzip, shuffle" / "lzf (not available)" / "none".
std::string describe_filters(const std::vector<FilterInfo>& filters) {
  if (filters.empty()) return "none";
  std::string text;
  for (const auto& f : filters) {
    if (!text.empty()) text += ", ";
    text += f.name;
    if (!f.available) text += " (not available)";
  }
  return text;
}

// The rules of dataset.hpp's loader, applied to one dataset's metadata.
std::string usable_as(hid_t dataset, const std::vector<std::int64_t>& shape, const StorageInfo& storage) {
  for (const auto& f : storage.filters)
    if (!f.available) return "not usable: filter '" + f.name + "' is not available (its plugin, or h5repack)";
  H5Datatype type(SPMD_CHECK_HDF5(H5Dget_type(dataset), "reading a dataset's type"));
  bool is_enum = false;
  const bool integer_labels = label_type_of(type.get(), is_enum).has_value();
  if (is_enum)
    return integer_labels && is_column(shape) ? "labels (enum as its integers)"
                                              : "not usable: an enum that is not a label column";
  const std::optional<ElementType> element = element_type_of(type.get());
  if (!element) return "not usable: dtype " + describe_hdf5_type(type.get()) + " (numbers only)";
  if (shape.empty() || shape[0] == 0) return "not usable: " + std::string(shape.empty() ? "a scalar" : "no rows");
  if (is_column(shape))
    return is_integer(*element) ? "labels"
           : *element == ElementType::Float32 || *element == ElementType::Float64
               ? std::string("labels where every value is a whole number (") + to_string(*element) + ")"
               : std::string("not usable as labels: ") + to_string(*element) + " (integers, or floats holding whole numbers)";
  std::string text = "features (logreg, eval";
  if (shape.size() == 3 || shape.size() == 4) text += "; images [N, H, W(, C)]: ensemble, eval --model cnn";
  return text + ")";
}

}  // namespace

FileDescription describe_file(const std::string& path) {
  H5Reader reader(path);
  FileDescription file;
  file.path = path;
  std::error_code ec;
  file.file_bytes = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
  file.attributes = describe_attributes(reader, "/");
  file.broken_links = broken_links(reader.file());
  for (const auto& name : reader.datasets()) {
    DatasetDescription d;
    d.name = name;
    // Before the dataset is open: an open by name with HDF5's default access (the attributes')
    // is refused while it is open with another external-file prefix.
    d.attributes = describe_attributes(reader, name);
    H5Dataset dataset = open_dataset(reader.file(), path, name, "described dataset", ExternalCheck::describe_only);
    d.shape = dataset_dims(dataset.get());
    H5Datatype type(SPMD_CHECK_HDF5(H5Dget_type(dataset.get()), "reading a dataset's type"));
    d.dtype = describe_hdf5_type(type.get());
    d.bytes = static_cast<std::int64_t>(H5Dget_storage_size(dataset.get()));
    d.storage = dataset_storage(dataset.get());
    const StorageInfo& storage = d.storage;
    d.usable = usable_as(dataset.get(), d.shape, storage);
    if (d.usable.rfind("not usable", 0) != 0)
      d.notes = storage_notes(storage, d.shape, static_cast<std::int64_t>(H5Tget_size(type.get())), path, name);
    if (const std::string external = external_note(find_external_files(dataset.get(), path)); !external.empty())
      d.notes.push_back(external);
    const auto element = element_type_of(type.get());
    if (element && is_integer(*element) && d.shape.size() == 1 && storage.layout != "virtual" &&
        d.usable.rfind("not usable", 0) != 0) {
      try {
        d.histogram = histogram_of(reader, name);
      } catch (const Error&) {
        // uint64 values beyond int64: no histogram rather than no description.
      }
    }
    file.datasets.push_back(std::move(d));
  }
  // Sparse matrices (a group with indptr) and AnnData categorical columns (a group with codes).
  for (const auto& d : file.datasets) {
    const auto slash = d.name.rfind('/');
    const std::string group = d.name.substr(0, slash), leaf = d.name.substr(slash + 1);
    if (group.empty() || (leaf != "indptr" && leaf != "codes")) continue;
    std::string what;
    try {
      if (leaf == "indptr") {
        const auto info = probe_sparse_matrix(reader, group);
        if (!info) continue;
        what = info->describe() + "; usable as features (logreg)";
      } else {
        if (!reader.has_attribute(group, "encoding-type") ||
            reader.attribute(group, "encoding-type").text != "categorical" || !reader.has_dataset(group + "/categories"))
          continue;
        std::string names;
        const auto categories = reader.read_strings(group + "/categories");
        for (std::size_t c = 0; c < categories.size() && c < 8; ++c) names += (c ? ", " : "") + categories[c];
        what = "categorical, " + std::to_string(categories.size()) + " categories: " + names +
               (categories.size() > 8 ? ", ..." : "") + "; usable as labels (logreg on a sparse matrix)";
      }
    } catch (const Error& e) {
      what = std::string("not usable: ") + e.what();
    }
    file.groups.emplace_back(group.substr(1), what);
  }
  return file;
}

nlohmann::json to_json(const FileDescription& f) {
  auto attributes_json = [](const std::vector<AttributeDescription>& attributes) {
    nlohmann::json a = nlohmann::json::object();
    for (const auto& x : attributes) a[x.name] = x.json;
    return a;
  };
  nlohmann::json j = {{"path", f.path}, {"file_bytes", f.file_bytes}, {"attributes", attributes_json(f.attributes)},
                      {"broken_links", nlohmann::json::array()}, {"datasets", nlohmann::json::array()}};
  for (const auto& b : f.broken_links) j["broken_links"].push_back({{"name", b.name}, {"target", b.target}});
  j["groups"] = nlohmann::json::array();
  for (const auto& [name, what] : f.groups) j["groups"].push_back({{"name", name}, {"description", what}});
  for (const auto& d : f.datasets) {
    nlohmann::json dj = {{"name", d.name}, {"shape", d.shape}, {"dtype", d.dtype}, {"bytes", d.bytes},
                         {"layout", d.storage.layout}, {"chunk", d.storage.chunk},
                         {"filters", describe_filters(d.storage.filters)}, {"usable", d.usable},
                         {"chunks_total", d.storage.chunks_total}, {"chunks_written", d.storage.chunks_written},
                         {"notes", d.notes}, {"attributes", attributes_json(d.attributes)}};
    if (d.histogram) {
      nlohmann::json counts = nlohmann::json::object();
      for (const auto& [value, count] : d.histogram->counts) counts[std::to_string(value)] = count;
      dj["histogram"] = {{"min", d.histogram->min},
                         {"max", d.histogram->max},
                         {"distinct", d.histogram->distinct},
                         {"distinct_at_least", d.histogram->distinct_at_least},
                         {"counts", counts}};
    }
    j["datasets"].push_back(dj);
  }
  return j;
}

std::string to_text(const FileDescription& f) {
  std::ostringstream os;
  os << "# file " << f.path << " (" << human_bytes(f.file_bytes) << ")\n";
  for (const auto& a : f.attributes) os << "#   " << a.name << " = " << a.value << "\n";
  std::size_t width = 7;
  for (const auto& d : f.datasets) width = std::max(width, d.name.size());
  os << std::left << std::setw(static_cast<int>(width) + 2) << "dataset" << std::setw(22) << "dtype" << std::setw(24)
     << "shape"
     << "size on disk\n";
  for (const auto& d : f.datasets) {
    os << std::left << std::setw(static_cast<int>(width) + 2) << d.name << std::setw(22) << d.dtype << std::setw(24)
       << format_shape(d.shape) << human_bytes(d.bytes) << "\n";
    os << "    layout " << d.storage.layout << (d.storage.chunk.empty() ? "" : " " + format_shape(d.storage.chunk))
       << ", filters " << describe_filters(d.storage.filters)
       << "; " << (d.usable.rfind("not usable", 0) == 0 ? "" : "usable as ") << d.usable << "\n";
    for (const auto& note : d.notes) os << "    note: " << note << "\n";
    for (const auto& a : d.attributes) os << "    @" << a.name << " = " << a.value << "\n";
  }
  for (const auto& [name, what] : f.groups) os << "group " << name << ": " << what << "\n";
  for (const auto& b : f.broken_links)
    os << "note: link " << b.name << " leads nowhere (" << b.target << ": the file or the object is missing)\n";
  for (const auto& d : f.datasets) {
    if (!d.histogram) continue;
    const auto& h = *d.histogram;
    os << "\nhistogram of " << d.name << ": " << (h.distinct_at_least ? "at least " : "") << h.distinct
       << " distinct values in [" << h.min << ", " << h.max << "]\n";
    if (h.counts.empty()) {
      os << "  (more than " << kMaxHistogramValues << " distinct values: not listed)\n";
      continue;
    }
    os << std::right;
    for (const auto& [value, count] : h.counts) os << "  " << std::setw(8) << value << "  " << std::setw(12) << count << "\n";
    os << std::left;
  }
  return os.str();
}

}  // namespace spmd::data
