#include "spmd/data/dataset.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "spmd/data/feature_decoder.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/data/storage.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/watchdog.hpp"
#include "spmd/runtime/time_account.hpp"
#include "label_checks.hpp"
#include "row_read.hpp"

namespace spmd::data {

namespace {

std::string describe_keys(const DatasetKeys& keys) {
  std::string s = "features '" + keys.features + "'";
  if (!keys.labels.empty()) s += " and labels '" + keys.labels + "'";
  return s;
}

// The storage of a dataset we are about to read: every filter must be decodable here, and
// every value defined. Virtual and partly written datasets are read apart (DatasetShape).
void check_storage(hid_t dataset, const std::string& path, const std::string& role, const std::string& name,
                   bool& is_virtual, bool& partly_written) {
  const StorageInfo storage = dataset_storage(dataset);
  require_decodable(storage, path, role, name);
  require_defined_values(storage, path, role, name);
  is_virtual = storage.is_virtual();
  partly_written = storage.partly_written();
}

// Validates the datasets named by keys and returns their shape; the opened datasets are
// handed to the caller (who keeps them for reading). Throws spmd::Error.
DatasetShape inspect(hid_t file, const std::string& path, const DatasetKeys& keys, H5Dataset& features_out,
                     H5Dataset& labels_out) {
  if (keys.features.empty()) throw Error("'" + path + "': no features dataset name given");
  const std::string fwhere = "'" + path + "': features dataset '" + keys.features + "'";
  DatasetShape shape;
  H5Dataset features = open_dataset(file, path, keys.features, "features");
  H5Datatype ftype(SPMD_CHECK_HDF5(H5Dget_type(features.get()), "reading a dataset's type"));
  const auto element = element_type_of(ftype.get());
  if (!element)
    throw Error(fwhere + " has dtype " + describe_hdf5_type(ftype.get()) +
                "; supported: integers of 8-64 bits, float16, float32, float64");
  shape.features_type = *element;
  const auto fdims = dataset_dims(features.get());
  if (fdims.size() < 2)
    throw Error(fwhere + " has shape " + format_shape(fdims) + " (" + std::to_string(fdims.size()) +
                "-D); features must be at least 2-D [N, ...]");
  check_storage(features.get(), path, "features", keys.features, shape.features_virtual, shape.features_partly_written);
  shape.rows = fdims[0];
  shape.sample_shape.assign(fdims.begin() + 1, fdims.end());
  shape.sample_size = 1;
  for (auto d : shape.sample_shape) shape.sample_size *= d;
  if (shape.sample_size == 0) throw Error(fwhere + " has shape " + format_shape(fdims) + ": every sample is empty");

  if (!keys.labels.empty()) {
    const std::string lwhere = "'" + path + "': labels dataset '" + keys.labels + "'";
    H5Dataset labels = open_dataset(file, path, keys.labels, "labels");
    H5Datatype ltype(SPMD_CHECK_HDF5(H5Dget_type(labels.get()), "reading a dataset's type"));
    shape.labels_type = label_type_of(ltype.get(), shape.labels_enum);
    // Class indices stored as floats (a pandas column, y.astype(float)): read where every
    // value is a whole number (read_labels_as checks each).
    if (!shape.labels_type && !shape.labels_enum) {
      const auto element = element_type_of(ltype.get());
      if (element == ElementType::Float32 || element == ElementType::Float64) shape.labels_type = element;
    }
    if (!shape.labels_type)
      throw Error(lwhere + " has dtype " + describe_hdf5_type(ltype.get()) +
                  "; labels must be an integer type (int8 ... uint64), bool / an integer enum as h5py writes them, or "
                  "float32 / float64 holding whole numbers" +
                  (H5Tget_class(ltype.get()) == H5T_STRING
                       ? ": class names? store their indices in the model's class order (names, y = np.unique(labels, "
                         "return_inverse=True) sorts the names)"
                       : ""));
    const auto ldims = dataset_dims(labels.get());
    // [N, 1] is read as [N].
    if (!is_column(ldims))
      throw Error(lwhere + " has shape " + format_shape(ldims) + " (" + std::to_string(ldims.size()) +
                  "-D); labels must be 1-D [N] (or [N, 1])" +
                  (ldims.size() == 2 ? ": one-hot labels? store their class indices, y.argmax(axis=1)" : ""));
    check_storage(labels.get(), path, "labels", keys.labels, shape.labels_virtual, shape.labels_partly_written);
    if (ldims[0] != shape.rows)
      throw Error(fwhere + " has " + std::to_string(shape.rows) + " rows but labels dataset '" + keys.labels +
                  "' has " + std::to_string(ldims[0]) + "; both must have the same N");
    labels_out = std::move(labels);
  }
  if (shape.rows == 0)
    throw Error(fwhere + (keys.labels.empty() ? std::string() : " (and labels '" + keys.labels + "')") +
                " is empty (N = 0 rows)");
  features_out = std::move(features);
  return shape;
}

}  // namespace

ShardReader::ShardReader(const runtime::Context& ctx, std::string path, DatasetKeys keys)
    : ctx_(ctx), path_(std::move(path)), keys_(std::move(keys)) {
  file_ = open_file_parallel(ctx_, path_, describe_keys(keys_));
  // The metadata is the same on every rank, so normally all ranks fail alike; agreeing
  // still guarantees that nobody goes on to a collective read alone.
  runtime::agree_on(ctx_.comm(), [&] {
    shape_ = inspect(file_.get(), path_, keys_, features_, labels_);
    collective_xfer_ = collective_transfer("asking for collective MPI-IO transfers");
    if (shape_.features_virtual || shape_.labels_virtual) {
      // HDF5 1.10 reads virtual datasets only through a POSIX-driver handle: each rank opens
      // the file on its own and reads its rows independently (the mapped source files too).
      serial_file_ = open_checked_file_serial(path_, describe_keys(keys_));  // checked just above
      if (shape_.features_virtual) features_ = open_dataset(serial_file_.get(), path_, keys_.features, "features");
      if (shape_.labels_virtual) labels_ = open_dataset(serial_file_.get(), path_, keys_.labels, "labels");
    }
    if (shape_.labels_enum) {
      H5Datatype stored(SPMD_CHECK_HDF5(H5Dget_type(labels_.get()), "reading the labels' enum type"));
      labels_mem_type_ = H5Datatype(SPMD_CHECK_HDF5(H5Tget_native_type(stored.get(), H5T_DIR_ASCEND),
                                                    "the native form of the labels' enum type"));
    }
  });
}

ShardReader::~ShardReader() = default;

bool ShardReader::last_read_collective() const {
  H5D_mpio_actual_io_mode_t mode = H5D_MPIO_NO_COLLECTIVE;
  SPMD_CHECK_HDF5(H5Pget_mpio_actual_io_mode(collective_xfer_.get(), &mode), "asking how the last read was done");
  return mode != H5D_MPIO_NO_COLLECTIVE;
}

void ShardReader::set_max_read_bytes(std::int64_t bytes) { max_read_bytes_ = std::max<std::int64_t>(bytes, 1); }

void ShardReader::check_range(std::int64_t first_row, std::int64_t count, std::size_t out_size, std::int64_t per_row,
                              const std::string& dataset) const {
  std::string error;
  if (first_row < 0 || count < 0 || first_row > shape_.rows || count > shape_.rows - first_row) {
    error = rank_prefix(ctx_) + "'" + path_ + "': cannot read rows [" + std::to_string(first_row) + ", " +
            std::to_string(first_row + count) + ") of dataset '" + dataset + "', which has " +
            std::to_string(shape_.rows) + " rows";
  } else if (static_cast<std::uint64_t>(out_size) < static_cast<std::uint64_t>(count * per_row)) {
    error = rank_prefix(ctx_) + "'" + path_ + "': the buffer for " + std::to_string(count) + " rows of dataset '" +
            dataset + "' holds " + std::to_string(out_size) + " values, " + std::to_string(count * per_row) +
            " are needed";
  }
  runtime::agree_or_throw(ctx_.comm(), error);
}

FeatureDecoder ShardReader::feature_decoder() const {
  return FeatureDecoder(shape_.features_type, scale_, "'" + path_ + "': features dataset '" + keys_.features + "'");
}

template <class Destination, class Consume>
void ShardReader::read_feature_pieces(std::int64_t first_row, std::int64_t count, Destination&& destination,
                                      Consume&& consume) {
  const std::int64_t piece_rows = std::max<std::int64_t>(
      1, max_read_bytes_ / (shape_.sample_size * static_cast<std::int64_t>(size_of(shape_.features_type))));
  read_in_pieces<std::byte>(ctx_, features_.get(), features_xfer(), first_row, count, piece_rows, destination, consume,
                            native_hdf5_type(shape_.features_type));
}

void ShardReader::read_features(std::int64_t first_row, std::int64_t count, std::span<float> out,
                                std::int64_t out_row_stride) {
  const std::int64_t elems = shape_.sample_size;
  runtime::agree_on(ctx_.comm(), [&] {
    if (out_row_stride < elems)
      throw Error(rank_prefix(ctx_) + "'" + path_ + "': rows of " + std::to_string(elems) + " features cannot be " +
                  std::to_string(out_row_stride) + " floats apart");
  });
  // The range check asks for count rows of out_row_stride floats (the last row's tail too).
  check_range(first_row, count, out.size(), out_row_stride, keys_.features);
  const FeatureDecoder decoder = feature_decoder();
  const std::size_t row_bytes = static_cast<std::size_t>(elems) * decoder.element_bytes();
  // float32 stored as the models see it, in rows as the file has them, is read straight
  // into out; the rest (other types, or wider rows) goes through a staging piece.
  const bool straight = decoder.in_place() && out_row_stride == elems;
  std::vector<std::byte> staging;
  FeatureRange range;
  read_feature_pieces(
      first_row, count,
      [&](std::int64_t local_row, std::int64_t rows) {
        if (straight) return reinterpret_cast<std::byte*>(out.data() + local_row * elems);
        staging.resize(static_cast<std::size_t>(rows) * row_bytes);
        return staging.data();
      },
      [&](const std::byte* data, std::int64_t row0, std::int64_t rows) {
        decoder.check(data, row0, rows, elems);
        float* dst = out.data() + (row0 - first_row) * out_row_stride;
        if (!straight) {
          if (out_row_stride == elems) {
            decoder.decode(data, rows * elems, dst);
          } else {
            for (std::int64_t r = 0; r < rows; ++r)
              decoder.decode(data + static_cast<std::size_t>(r) * row_bytes, elems, dst + r * out_row_stride);
          }
        }
        if (decoder.checks_image_range())
          for (std::int64_t r = 0; r < rows; ++r) range.add(dst + r * out_row_stride, elems);
      });
  // Images whose values say they were never scaled: refused (agreed over ranks) rather than
  // trained on. uint8 under auto is scaled above; an explicit scale is the user's word.
  if (decoder.checks_image_range()) require_scaled_images(ctx_, range, decoder);
}

template <class Destination>
void ShardReader::read_checked(std::int64_t first_row, std::int64_t count, Destination&& destination) {
  const FeatureDecoder decoder = feature_decoder();
  const std::int64_t elems = shape_.sample_size;
  const auto row_bytes = static_cast<std::int64_t>(decoder.element_bytes()) * elems;
  std::vector<float> decoded(decoder.checks_image_range() ? static_cast<std::size_t>(elems) : 0);  // one row
  FeatureRange range;
  read_feature_pieces(first_row, count, destination, [&](const std::byte* data, std::int64_t row0, std::int64_t rows) {
    decoder.check(data, row0, rows, elems);
    if (!decoder.checks_image_range()) return;
    for (std::int64_t r = 0; r < rows; ++r) {
      decoder.decode(data + r * row_bytes, elems, decoded.data());
      range.add(decoded.data(), elems);
    }
  });
  if (decoder.checks_image_range()) require_scaled_images(ctx_, range, decoder);
}

void ShardReader::read_stored(std::int64_t first_row, std::int64_t count, std::span<std::byte> out) {
  const std::int64_t row_bytes = shape_.sample_size * static_cast<std::int64_t>(size_of(shape_.features_type));
  check_range(first_row, count, out.size(), row_bytes, keys_.features);
  read_checked(first_row, count,
               [&](std::int64_t local_row, std::int64_t) { return out.data() + local_row * row_bytes; });
}

void ShardReader::check_features(std::int64_t first_row, std::int64_t count) {
  const std::int64_t row_bytes = shape_.sample_size * static_cast<std::int64_t>(size_of(shape_.features_type));
  check_range(first_row, count, static_cast<std::size_t>(std::max<std::int64_t>(count, 0) * row_bytes), row_bytes,
              keys_.features);
  std::vector<std::byte> piece;
  read_checked(first_row, count, [&](std::int64_t, std::int64_t rows) {
    piece.resize(static_cast<std::size_t>(rows * row_bytes));
    return piece.data();
  });
}

namespace {
template <class Disk>
void read_labels_as(const runtime::Context& ctx, hid_t dataset, hid_t xfer, hid_t mem_type, std::int64_t first,
                    std::int64_t count, std::int64_t piece_rows, std::span<std::int64_t> out, const std::string& where) {
  std::vector<Disk> staging;
  read_in_pieces<Disk>(
      ctx, dataset, xfer, first, count, piece_rows,
      [&](std::int64_t, std::int64_t rows) {
        staging.resize(static_cast<std::size_t>(rows));
        return staging.data();
      },
      [&](const Disk* data, std::int64_t row0, std::int64_t rows) {
        std::int64_t* dst = out.data() + (row0 - first);
        for (std::int64_t i = 0; i < rows; ++i) {
          if constexpr (std::is_floating_point_v<Disk>) {
            // 2^62: past every class count, and exact in both float types.
            if (!(std::trunc(data[i]) == data[i] && std::abs(data[i]) <= 0x1p62)) {
              std::ostringstream value;
              value << std::setprecision(std::numeric_limits<Disk>::max_digits10) << data[i];
              throw Error(where + ": row " + std::to_string(row0 + i) + " has label " + value.str() +
                          "; float labels must be whole numbers (class indices, below 2^62)");
            }
          }
          if constexpr (std::is_same_v<Disk, std::uint64_t>) {
            if (data[i] > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
              throw Error(where + ": row " + std::to_string(row0 + i) + " has label " + std::to_string(data[i]) +
                          ", which does not fit in int64");
          }
          dst[i] = static_cast<std::int64_t>(data[i]);
        }
      },
      mem_type);
}
}  // namespace

void ShardReader::read_labels(std::int64_t first_row, std::int64_t count, std::span<std::int64_t> out) {
  if (keys_.labels.empty() || !shape_.labels_type)
    throw CollectiveError("'" + path_ + "': read_labels called on a reader opened without a labels dataset");
  check_range(first_row, count, out.size(), 1, keys_.labels);
  const std::int64_t piece_rows =
      std::max<std::int64_t>(1, max_read_bytes_ / static_cast<std::int64_t>(size_of(*shape_.labels_type)));
  const std::string where = "'" + path_ + "': labels dataset '" + keys_.labels + "'";
  const hid_t mem = shape_.labels_enum ? labels_mem_type_.get() : 0;
  const auto read_as = [&]<class Disk>(Disk) {
    read_labels_as<Disk>(ctx_, labels_.get(), labels_xfer(), mem, first_row, count, piece_rows, out, where);
  };
  switch (*shape_.labels_type) {
    case ElementType::Int8: return read_as(std::int8_t{});
    case ElementType::UInt8: return read_as(std::uint8_t{});
    case ElementType::Int16: return read_as(std::int16_t{});
    case ElementType::UInt16: return read_as(std::uint16_t{});
    case ElementType::Int32: return read_as(std::int32_t{});
    case ElementType::UInt32: return read_as(std::uint32_t{});
    case ElementType::Int64: return read_as(std::int64_t{});
    case ElementType::UInt64: return read_as(std::uint64_t{});
    case ElementType::Float32: return read_as(float{});
    case ElementType::Float64: return read_as(double{});
    default: throw CollectiveError(where + ": labels must be an integer type");  // rejected by inspect()
  }
}

DatasetShape probe_shape(const runtime::Context& ctx, const std::string& path, const DatasetKeys& keys) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  ShardReader reader(ctx, path, keys);
  return reader.shape();
}

DatasetShape probe_shape(const std::string& path, const DatasetKeys& keys) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  H5File file = open_file_serial(path, describe_keys(keys));
  H5Dataset features, labels;
  return inspect(file.get(), path, keys, features, labels);
}

std::int64_t label_bound(std::int64_t examples) {
  return std::min<std::int64_t>(kMaxClasses, std::max<std::int64_t>(64 * examples, 1024));
}

namespace {
// The pieces of the check-only pass of a shard left in the file: its staging is all it holds.
constexpr std::int64_t kCheckPieceBytes = std::int64_t{16} << 20;

// Labels go into a shard's int32 column through a bounded int64 piece of this many rows
// (8 MiB), so that they cost 4 bytes per row at peak (not a whole int64 copy, 12 bytes per
// row), with the facts the loader's checks need, found on the way.
constexpr std::int64_t kLabelPieceRows = std::int64_t{1} << 20;

// Collective (every rank calls it, whatever its rows). Reads rows [first_row, first_row +
// rows) into out (resized); a label outside int32 is stored as -1, and reported in the scan.
LabelScan read_labels_int32(const runtime::Context& ctx, ShardReader& reader, std::int64_t first_row, std::int64_t rows,
                            std::int64_t bound, int classes, std::vector<std::int32_t>& out) {
  runtime::agree_on(ctx.comm(), [&] { out.resize(static_cast<std::size_t>(std::max<std::int64_t>(rows, 0))); });
  // Every rank reads as many pieces (the reads are collective), some of them empty.
  std::int64_t pieces = (std::max<std::int64_t>(rows, 0) + kLabelPieceRows - 1) / kLabelPieceRows;
  runtime::allreduce_max(ctx, std::span<std::int64_t>(&pieces, 1));
  std::vector<std::int64_t> piece(static_cast<std::size_t>(std::min(std::max<std::int64_t>(rows, 0), kLabelPieceRows)));
  const std::int64_t limit = classes > 0 ? classes : bound;
  LabelScan scan;
  for (std::int64_t p = 0; p < pieces; ++p) {
    const std::int64_t done = p * kLabelPieceRows;
    const std::int64_t n = std::clamp<std::int64_t>(rows - done, 0, kLabelPieceRows);
    // A rank past its own rows joins with an empty read at its end: first_row + done could lie
    // beyond the dataset (a short last rank beside a long first one).
    const std::int64_t at = std::min(done, std::max<std::int64_t>(rows, 0));
    reader.read_labels(first_row + at, n, std::span<std::int64_t>(piece.data(), static_cast<std::size_t>(n)));
    std::int32_t* dst = out.data() + at;
    for (std::int64_t i = 0; i < n; ++i) dst[i] = scan.see(first_row + done + i, piece[static_cast<std::size_t>(i)], bound, limit);
  }
  return scan;
}

// Reads this rank's rows into a new shard (features in `form`); labels too when the reader
// has them.
LoadedShard load(const runtime::Context& ctx, ShardReader& reader, std::int64_t first_row, std::int64_t rows,
                 int classes, FeatureForm form, OnesColumn ones = OnesColumn::none) {
  const DatasetShape& shape = reader.shape();
  LoadedShard shard;
  shard.sample_shape = shape.sample_shape;
  shard.sample_size = shape.sample_size;
  shard.global_rows = shape.rows;
  shard.first_row = first_row;
  shard.rows = rows;
  shard.stored_type = shape.features_type;
  shard.ones_column = ones == OnesColumn::append && form == FeatureForm::Float32;
  const std::int64_t row_floats = shard.row_size();
  // Range first (agreed), so that a bad request fails cleanly rather than in an allocation.
  const bool range_ok = first_row >= 0 && rows >= 0 && first_row <= shape.rows && rows <= shape.rows - first_row;
  const std::int64_t row_bytes = shape.sample_size * static_cast<std::int64_t>(size_of(shape.features_type));
  runtime::agree_on(ctx.comm(), [&] {
    if (!range_ok) return;
    if (form == FeatureForm::Float32) shard.features.resize(static_cast<std::size_t>(rows * row_floats));
    if (form == FeatureForm::Stored) shard.stored.resize(static_cast<std::size_t>(rows * row_bytes));
  });
  switch (form) {
    case FeatureForm::Float32:
      reader.read_features(first_row, rows, shard.features, row_floats);
      if (shard.ones_column)
        for (std::int64_t r = 0; r < rows; ++r) shard.features[static_cast<std::size_t>(r * row_floats + shape.sample_size)] = 1.0f;
      break;
    case FeatureForm::Stored: reader.read_stored(first_row, rows, shard.stored); break;
    case FeatureForm::LeftInFile:
      // Only the image check needs every value before the run (it is agreed over ranks);
      // the rest is checked as the rows are streamed.
      if (reader.feature_decoder().checks_image_range()) reader.check_features(first_row, rows);
      break;
  }
  if (reader.keys().labels.empty()) return shard;

  const std::string where = "'" + reader.path() + "': labels dataset '" + reader.keys().labels + "'";
  const LabelScan scan =
      read_labels_int32(ctx, reader, first_row, rows, scan_bound(shape.rows, classes), classes, shard.labels);
  CheckedLabels checked = agree_on_labels(ctx, where, shape.rows, classes, scan, shard.labels);
  shard.class_counts = std::move(checked.class_counts);
  shard.warnings.insert(shard.warnings.end(), checked.warnings.begin(), checked.warnings.end());
  shard.classes = checked.classes;
  return shard;
}
}  // namespace

LoadedShard load_shard(const runtime::Context& ctx, const std::string& path, const DatasetKeys& keys,
                       std::int64_t first_row, std::int64_t rows, int classes, const FeatureScale& scale,
                       FeatureForm form, OnesColumn ones) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  ShardReader reader(ctx, path, keys);
  reader.set_feature_scale(scale);
  if (form == FeatureForm::LeftInFile) reader.set_max_read_bytes(kCheckPieceBytes);
  LoadedShard shard = load(ctx, reader, first_row, rows, classes, form, ones);
  shard.scale = scale;
  return shard;
}

LoadedShard load_features(const runtime::Context& ctx, const std::string& path, const std::string& features_key,
                          std::int64_t first_row, std::int64_t rows) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  ShardReader reader(ctx, path, DatasetKeys{features_key, ""});
  return load(ctx, reader, first_row, rows, 0, FeatureForm::Float32);
}

}  // namespace spmd::data
