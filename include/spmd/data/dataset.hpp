#pragma once
// Loading a labelled dataset from HDF5, each rank reading only its own rows.
//
// A dataset is two HDF5 datasets in one file:
//   features [N, d1, d2, ...]  any integer type (8-64 bits), float16, float32 or float64 on disk;
//                              float32 in memory. uint8 (images) are scaled to [0, 1] by
//                              /255; the others are converted as they are.
//   labels   [N] or [N, 1]      any integer type on disk, or an enum over one (h5py's bool:
//                              FALSE/TRUE read as 0/1); int32 in memory, in [0, classes).
// Storage as h5py writes it: contiguous, chunked, compact or virtual; filters are checked
// up front (one this HDF5 cannot decode is named, with its fixes: data/storage.hpp).
// The caller names both datasets (DatasetKeys) and picks this rank's contiguous row range
// (the sharding layer's split_for_process); ranges may be empty.
//
// Every function taking a Context is collective over ctx.comm(): all ranks call it, with
// the same path and keys. Reads use MPI-IO with collective transfers (independent ones for
// datasets HDF5 cannot read collectively: DatasetShape), a rank with no rows takes part
// with an empty selection. Every problem (missing file or dataset, wrong rank
// or dtype, N mismatch, N == 0, a bad range, a non-finite feature, a label out of range) is
// agreed over the ranks: all of them throw the same spmd::CollectiveError, whose message
// names the file, the dataset, the rank (for per-rank data) and what is wrong.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "spmd/data/element_type.hpp"
#include "spmd/data/h5_handle.hpp"
#include "spmd/runtime/large_pages.hpp"

namespace spmd::runtime {
class Context;
}

namespace spmd::data {

class FeatureDecoder;

// Names of the two datasets inside the file ("images"/"labels", "X"/"y"; groups allowed:
// "train/x"). An empty `labels` means features only. The commands take them from the user
// or find them in the file (dataset_keys.hpp).
struct DatasetKeys {
  std::string features;
  std::string labels;
};

// How stored feature values become the float32 the models see (--input-scale).
//  auto:   uint8 is scaled by 1/255 (images, as numpy's x / 255.0); every other type keeps
//          its values. For images (`images` set: the CNN's input), data of another type
//          whose values go beyond [0, 1] (uint16 / int32 / float holding 0..255, say) is
//          refused, naming the range seen and the option to set: such data trained
//          unscaled silently diverges.
//  none:   every type keeps its values (uint8 too).
//  factor: every value becomes value * factor / divisor (in double, then rounded to float32;
//          "1/255" gives uint16 images exactly the bits auto gives uint8 ones).
struct FeatureScale {
  enum class Mode { Auto, None, Factor };
  Mode mode = Mode::Auto;
  double factor = 1.0;
  bool images = false;
  double divisor = 1.0;
  std::string text = "auto";  // as given: what a weights file records, what --help shows
  // "auto", "none", a number or a fraction such as "1/255"; throws spmd::Error naming
  // --input-scale otherwise.
  static FeatureScale parse(const std::string& text, bool images);
  // For option declarations (workloads/option_list.hpp): parse's two kinds, and the text back.
  static FeatureScale parse_images(const std::string& text) { return parse(text, true); }
  static FeatureScale parse_other(const std::string& text) { return parse(text, false); }
  static const std::string& text_of(const FeatureScale& s) { return s.text; }
  std::string describe() const;  // "auto", "none", "x 0.00392157"
};

// What the metadata says; no data is read.
struct DatasetShape {
  std::int64_t rows = 0;                   // N, the same for features and labels
  std::vector<std::int64_t> sample_shape;  // the features' dims after N, e.g. {28, 28, 1}
  std::int64_t sample_size = 0;            // product of sample_shape (floats per row)
  ElementType features_type = ElementType::Float32;
  std::optional<ElementType> labels_type;  // nullopt when keys.labels is empty; an enum's base type
  bool labels_enum = false;                // stored as an HDF5 enum (h5py's bool): read as its integers
  // Virtual datasets (h5py's VirtualLayout) are read with independent, per-rank POSIX reads:
  // this HDF5 (1.10) cannot read them through MPI-IO.
  bool features_virtual = false;
  bool labels_virtual = false;
  // Chunked datasets of which some chunks were never written (h5py, when only part of a
  // dataset was assigned) are read with independent MPI-IO transfers, which give the fill
  // value there as HDF5 defines: HDF5 1.10's collective read fails on such chunks
  // (MPI_File_set_view: invalid datatype) on the ranks whose rows they hold.
  bool features_partly_written = false;
  bool labels_partly_written = false;
};

// A column of 1.0 after each row's features in memory, x' = [x, 1], or none. A linear
// model fits its intercept b as one more row of its weights, W' = [W; b], with the same
// kernels (x' W' = x W + b). load_shard reads the stored rows straight into the wider rows
// (no second copy of the features); the cost is one float per row. FeatureForm::Float32 only.
enum class OnesColumn { none, append };

// What a load keeps of the features (load_shard).
enum class FeatureForm {
  Float32,     // LoadedShard::features, float32 as FeatureScale says: what most callers want
  Stored,      // LoadedShard::stored, as the file stores them (uint8 images stay 1 byte), checked
               // as a load checks; a FeatureDecoder (feature_decoder.hpp) gives the floats
  LeftInFile,  // neither: the caller streams the rows later (and checks them then). The image
               // check (FeatureScale) still reads every value now, in bounded pieces, since it
               // is agreed over every rank's rows before any work
};

// This rank's rows [first_row, first_row + rows) of the dataset.
struct LoadedShard {
  runtime::LargeVector<float> features; // row-major [rows, row_size()]; huge pages: read every step
  // FeatureForm::Stored: [rows, sample_size] values of stored_type in native byte order
  // (features is then empty); decode with FeatureDecoder(stored_type, scale, ...).
  runtime::LargeVector<std::byte> stored;
  ElementType stored_type = ElementType::Float32;  // the file's element type
  FeatureScale scale;                              // the scale the load applied (or that decoding applies)
  std::vector<std::int32_t> labels;     // [rows]; empty when loaded without labels
  std::vector<std::int64_t> sample_shape;
  std::int64_t sample_size = 0;
  std::int64_t global_rows = 0;         // N
  std::int64_t first_row = 0;           // global index of features[0]
  std::int64_t rows = 0;
  int classes = 0;                      // labels lie in [0, classes); 0 without labels
  std::vector<std::int64_t> class_counts;  // [classes]: examples of each class over all ranks
  std::vector<std::string> warnings;       // the same on every rank, for rank 0 to print
  bool ones_column = false;                // OnesColumn::append: features' last column is 1.0, not data

  // Floats per row of `features`: the sample, and the column of ones if any.
  std::int64_t row_size() const { return sample_size + (ones_column ? 1 : 0); }
};

inline constexpr std::int64_t kMaxClasses = std::int64_t{1} << 24;
// The largest label + 1 accepted for a dataset of `examples` rows: 64 x examples, at least
// 1024, at most kMaxClasses. Labels are class indices; a larger one is an id to remap (load_shard
// refuses it naming the row, instead of allocating a weight matrix for it).
std::int64_t label_bound(std::int64_t examples);

// Metadata only (for --dry-run): N, sample shape, dtypes, all validated. Collective.
DatasetShape probe_shape(const runtime::Context& ctx, const std::string& path, const DatasetKeys& keys);
// The same on this process alone (serial open); throws spmd::Error.
DatasetShape probe_shape(const std::string& path, const DatasetKeys& keys);

// Reads features and labels of rows [first_row, first_row + rows). Collective.
// classes > 0: labels must lie in [0, classes). classes <= 0: classes is inferred as
// 1 + the largest label read by any rank (0 if no rank read a row); labels must be >= 0.
// Either way a label >= label_bound(N) is refused; inferred classes without an example
// give a warning (LoadedShard::warnings).
// form: what is kept of the features (every form checks the labels alike). ones:
// OnesColumn::append gives every row a last column of 1.0 (LoadedShard::ones_column).
LoadedShard load_shard(const runtime::Context& ctx, const std::string& path, const DatasetKeys& keys,
                       std::int64_t first_row, std::int64_t rows, int classes, const FeatureScale& scale = {},
                       FeatureForm form = FeatureForm::Float32, OnesColumn ones = OnesColumn::none);

// Features only (keys.labels is ignored). Collective.
LoadedShard load_features(const runtime::Context& ctx, const std::string& path, const std::string& features_key,
                          std::int64_t first_row, std::int64_t rows);

// An open dataset, for reading a range in pieces into the caller's buffers (streaming a
// shard larger than memory, prefetching). Construction validates the metadata (as
// probe_shape). Construction, destruction (the MPI-IO file close) and every member that
// reads are collective: all ranks make the same sequence of calls, each with its own
// range (possibly empty).
class ShardReader {
 public:
  ShardReader(const runtime::Context& ctx, std::string path, DatasetKeys keys);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const DatasetShape& shape() const { return shape_; }
  const std::string& path() const { return path_; }
  const DatasetKeys& keys() const { return keys_; }

  // Rows [first_row, first_row + count) as float32 into out (count * sample_size values,
  // row-major; uint8 scaled by 1/255). Checks the range and that every value is finite.
  void read_features(std::int64_t first_row, std::int64_t count, std::span<float> out) {
    read_features(first_row, count, out, shape_.sample_size);
  }
  // The same with row r at out[r * out_row_stride] (out_row_stride >= sample_size; out
  // holds count * out_row_stride values): the floats after each row's sample are left as
  // they are, for the caller's extra columns (OnesColumn).
  void read_features(std::int64_t first_row, std::int64_t count, std::span<float> out, std::int64_t out_row_stride);
  // How read_features converts (default: FeatureScale{}, auto, not images).
  void set_feature_scale(const FeatureScale& scale) { scale_ = scale; }
  // The same rows as stored (count * sample_size values of shape().features_type, native
  // byte order: out holds count * that many bytes), checked as read_features checks them.
  void read_stored(std::int64_t first_row, std::int64_t count, std::span<std::byte> out);
  // read_features's checks alone, in pieces of at most the max read bytes; keeps nothing.
  void check_features(std::int64_t first_row, std::int64_t count);
  // The conversion read_features applies (the scale set above), naming this file and dataset.
  FeatureDecoder feature_decoder() const;

  // Labels of rows [first_row, first_row + count) into out (count values), widened to
  // int64 exactly; no class-range check (load_shard does that). Needs keys.labels.
  void read_labels(std::int64_t first_row, std::int64_t count, std::span<std::int64_t> out);

  // Whether HDF5 carried out this rank's last read as collective MPI-IO (false when it
  // fell back to independent I/O, e.g. for a big-endian file that needs conversion).
  bool last_read_collective() const;

  // Upper bound on the bytes one collective H5Dread moves per rank; larger requests are
  // split (every rank makes the same number of calls). Defaults to 64 MiB; must be the
  // same on every rank.
  void set_max_read_bytes(std::int64_t bytes);

 private:
  void check_range(std::int64_t first_row, std::int64_t count, std::size_t out_size, std::int64_t per_row,
                   const std::string& dataset) const;
  // The features' rows in pieces (at most max_read_bytes_ each, the same number of reads on
  // every rank), as stored: destination(local_row, rows) gives each piece's buffer,
  // consume(data, row0, rows) sees it; errors agreed after the last read.
  template <class Destination, class Consume>
  void read_feature_pieces(std::int64_t first_row, std::int64_t count, Destination&& destination, Consume&& consume);
  // The stored rows into destination's buffers, with read_features's checks.
  template <class Destination>
  void read_checked(std::int64_t first_row, std::int64_t count, Destination&& destination);

  const runtime::Context& ctx_;
  std::string path_;
  DatasetKeys keys_;
  DatasetShape shape_;
  std::int64_t max_read_bytes_ = 64 << 20;
  FeatureScale scale_;
  // H5P_DEFAULT: independent transfers (see DatasetShape).
  hid_t features_xfer() const {
    return shape_.features_virtual || shape_.features_partly_written ? H5P_DEFAULT : collective_xfer_.get();
  }
  hid_t labels_xfer() const {
    return shape_.labels_virtual || shape_.labels_partly_written ? H5P_DEFAULT : collective_xfer_.get();
  }

  // Declared in this order so that the datasets close before the (collective) file close.
  H5File file_;
  H5File serial_file_;  // only when a dataset is virtual (see DatasetShape)
  H5Dataset features_;
  H5Dataset labels_;
  H5PropList collective_xfer_;
  H5Datatype labels_mem_type_;  // only for enum labels
};

}  // namespace spmd::data
