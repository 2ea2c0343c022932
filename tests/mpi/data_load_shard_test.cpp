// Per-rank hyperslab loading under 1..4 ranks: every value of every rank's rows for all
// on-disk feature and label types and for splits with empty ranks; then every validation
// error, which must reach all ranks as one CollectiveError naming file and dataset.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

#include "spmd/data/dataset.hpp"
#include "spmd/data/h5_writer.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"

namespace {

namespace fs = std::filesystem;
using spmd::data::AtomicH5Writer;
using spmd::data::DatasetKeys;
using spmd::data::ElementType;
using spmd::data::LoadedShard;
using spmd::runtime::Context;

Context make_context() { return Context(MPI_COMM_WORLD, {"cpu", 1, 120.0}); }

// A folder every rank sees: rank 0 creates it and broadcasts its name; removed at the end.
class SharedDir {
 public:
  explicit SharedDir(const Context& ctx) : ctx_(ctx) {
    static int counter = 0;
    char name[512] = {0};
    if (ctx.is_root()) {
      const fs::path p = fs::temp_directory_path() /
                         ("spmd-data-mpi-" + std::to_string(::getpid()) + "-" + std::to_string(counter));
      fs::create_directories(p);
      std::snprintf(name, sizeof name, "%s", p.c_str());
    }
    ++counter;
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, ctx.comm());
    path_ = name;
  }
  ~SharedDir() {
    MPI_Barrier(ctx_.comm());
    if (ctx_.is_root()) fs::remove_all(path_);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename().string());
    return names;
  }

 private:
  const Context& ctx_;
  fs::path path_;
};

struct Range {
  std::int64_t first = 0, rows = 0;
};

// tfds.split_for_jax_process: contiguous, the first N % P ranks get one more row.
Range even_split(std::int64_t n, int rank, int size) {
  const std::int64_t base = n / size, extra = n % size;
  return {rank * base + std::min<std::int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}
// Everything on the last rank: all others read nothing.
Range all_on_last(std::int64_t n, int rank, int size) { return rank == size - 1 ? Range{0, n} : Range{n, 0}; }
// Growing shares (rank r gets about r / sum of r), rank 0 always empty when P > 1.
Range growing(std::int64_t n, int rank, int size) {
  const std::int64_t total = static_cast<std::int64_t>(size) * (size - 1) / 2;
  if (total == 0) return {0, n};
  auto start = [&](int r) { return r >= size ? n : n * (static_cast<std::int64_t>(r) * (r - 1) / 2) / total; };
  return {start(rank), start(rank + 1) - start(rank)};
}

// Feature values as a formula of (row, element), exact in each disk type.
template <class T>
T feature_value(std::int64_t row, std::int64_t e) {
  if constexpr (std::is_same_v<T, std::uint8_t>) return static_cast<T>((row * 31 + e * 7) % 256);
  else if constexpr (std::is_same_v<T, std::int32_t>) return static_cast<T>((row * 1000 + e) * (row % 2 ? -1 : 1));
  else if constexpr (std::is_integral_v<T>) {
    // Near the top of the type's range (and below 0 for signed types), where the
    // conversion to float32 rounds: it must round as static_cast<float> does.
    const T small = static_cast<T>((row * 13 + e) % 100);
    const T top = static_cast<T>(std::numeric_limits<T>::max() - 100);
    if constexpr (std::is_signed_v<T>) return static_cast<T>(row % 2 ? -top + small : top - small);
    else return static_cast<T>(top + small);
  }
  else if constexpr (std::is_same_v<T, float>) return static_cast<float>(row) + static_cast<float>(e) / 64.0f;
  else if constexpr (std::is_same_v<T, double>) return static_cast<double>(row) * 0.5 + static_cast<double>(e) * 1e-3;
}
template <class T>
float expected_float(std::int64_t row, std::int64_t e) {
  const T v = feature_value<T>(row, e);
  if constexpr (std::is_same_v<T, std::uint8_t>) return static_cast<float>(v / 255.0);
  return static_cast<float>(v);
}

template <class T>
std::vector<T> features_of(std::int64_t n, std::int64_t sample) {
  std::vector<T> v(static_cast<std::size_t>(n * sample));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t e = 0; e < sample; ++e) v[static_cast<std::size_t>(r * sample + e)] = feature_value<T>(r, e);
  return v;
}

std::int64_t label_value(std::int64_t row, int classes) { return (row * 7 + 3) % classes; }

template <class L>
std::vector<L> labels_of(std::int64_t n, int classes) {
  std::vector<L> v(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) v[static_cast<std::size_t>(r)] = static_cast<L>(label_value(r, classes));
  return v;
}

template <class T, class L = std::int64_t>
void write_dataset(const Context& ctx, const std::string& path, std::int64_t n, const std::vector<std::int64_t>& sample_shape,
                   int classes) {
  std::int64_t sample = 1;
  for (auto d : sample_shape) sample *= d;
  std::vector<std::int64_t> shape{n};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  spmd::data::write_on_root(ctx, path, [&](AtomicH5Writer& w) {
    w.write<T>("images", features_of<T>(n, sample), shape);
    w.write<L>("labels", labels_of<L>(n, classes), {n});
  });
}

// The first row whose value differs, as text ("" when all match). Loops report through
// it with EXPECT, not ASSERT: an ASSERT returns early, and a rank that skips the next
// collective would leave the others waiting.
template <class Got, class Want>
std::string first_mismatch(std::int64_t count, Got&& got, Want&& want) {
  for (std::int64_t i = 0; i < count; ++i)
    if (!(got(i) == want(i)))
      return "index " + std::to_string(i) + ": got " + std::to_string(got(i)) + ", want " + std::to_string(want(i));
  return "";
}

// ASSERTs here only end this function; the caller's next collective still runs on every rank.
template <class T>
void check_shard(const LoadedShard& s, Range range, std::int64_t n, std::int64_t sample, int classes, const char* what) {
  ASSERT_EQ(s.global_rows, n) << what;
  ASSERT_EQ(s.first_row, range.first) << what;
  ASSERT_EQ(s.rows, range.rows) << what;
  ASSERT_EQ(s.sample_size, sample) << what;
  ASSERT_EQ(s.features.size(), static_cast<std::size_t>(range.rows * sample)) << what;
  ASSERT_EQ(s.labels.size(), static_cast<std::size_t>(range.rows)) << what;
  for (std::int64_t r = 0; r < range.rows; ++r) {
    const std::int64_t global = range.first + r;
    for (std::int64_t e = 0; e < sample; ++e)
      ASSERT_EQ(s.features[static_cast<std::size_t>(r * sample + e)], expected_float<T>(global, e))
          << what << " row " << global << " element " << e;
    ASSERT_EQ(s.labels[static_cast<std::size_t>(r)], label_value(global, classes)) << what << " row " << global;
  }
}

template <class T>
void check_all_splits(const char* dtype) {
  Context ctx = make_context();
  SharedDir dir(ctx);
  const int P = ctx.size();
  const std::vector<std::int64_t> sample_shape{2, 3};
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{P - 1}, std::int64_t{P}, std::int64_t{P + 1},
                         std::int64_t{2 * P + 1}, std::int64_t{4 * P - 1}, std::int64_t{37}}) {
    if (n < 1) continue;
    const std::string path = dir.file(std::string(dtype) + "_" + std::to_string(n) + ".h5");
    write_dataset<T>(ctx, path, n, sample_shape, 5);
    for (auto split : {even_split, all_on_last, growing}) {
      const Range range = split(n, ctx.rank(), P);
      const LoadedShard s = spmd::data::load_shard(ctx, path, {"images", "labels"}, range.first, range.rows, 5);
      const std::string what = std::string(dtype) + " N=" + std::to_string(n) + " rank " + std::to_string(ctx.rank());
      check_shard<T>(s, range, n, 6, 5, what.c_str());
      EXPECT_EQ(s.sample_shape, sample_shape);
      EXPECT_EQ(s.classes, 5);
      // --classes given: classes without an example (N < 5) are the user's word, not warned about.
      EXPECT_TRUE(s.warnings.empty()) << what << ": " << (s.warnings.empty() ? "" : s.warnings[0]);
    }
  }
}

TEST(DataLoadShard, Uint8FeaturesScaledByOver255) { check_all_splits<std::uint8_t>("uint8"); }
TEST(DataLoadShard, Int32Features) { check_all_splits<std::int32_t>("int32"); }
// Every other integer type is read as its value (no scaling: only uint8 images are scaled).
TEST(DataLoadShard, Int8Features) { check_all_splits<std::int8_t>("int8"); }
TEST(DataLoadShard, Int16Features) { check_all_splits<std::int16_t>("int16"); }
TEST(DataLoadShard, Uint16Features) { check_all_splits<std::uint16_t>("uint16"); }
TEST(DataLoadShard, Uint32Features) { check_all_splits<std::uint32_t>("uint32"); }
TEST(DataLoadShard, Int64Features) { check_all_splits<std::int64_t>("int64"); }
TEST(DataLoadShard, Uint64Features) { check_all_splits<std::uint64_t>("uint64"); }
TEST(DataLoadShard, Float32Features) { check_all_splits<float>("float32"); }
TEST(DataLoadShard, Float64Features) { check_all_splits<double>("float64"); }

// OnesColumn::append on every read path: float32 read in place through a strided memory
// selection (scaled there too, with a factor), float64 and integers converted from staging.
// Each row is the plain load's row followed by 1.0. EXPECTs only: every rank must reach the
// next load (a collective).
template <class T>
void check_ones_column(const char* name, const spmd::data::FeatureScale& scale) {
  Context ctx = make_context();
  SharedDir dir(ctx);
  const int P = ctx.size();
  const std::int64_t n = 4 * static_cast<std::int64_t>(P) + 3, sample = 6, row = sample + 1;
  const std::string path = dir.file(std::string(name) + ".h5");
  write_dataset<T>(ctx, path, n, {2, 3}, 5);
  for (auto split : {even_split, all_on_last, growing}) {
    const Range range = split(n, ctx.rank(), P);
    const DatasetKeys keys{"images", "labels"};
    const LoadedShard plain = spmd::data::load_shard(ctx, path, keys, range.first, range.rows, 5, scale);
    const LoadedShard ones = spmd::data::load_shard(ctx, path, keys, range.first, range.rows, 5, scale,
                                                    spmd::data::FeatureForm::Float32, spmd::data::OnesColumn::append);
    const std::string what = std::string(name) + " rows from " + std::to_string(range.first);
    EXPECT_FALSE(plain.ones_column) << what;
    EXPECT_TRUE(ones.ones_column) << what;
    EXPECT_EQ(ones.sample_size, sample) << what;
    EXPECT_EQ(ones.row_size(), row) << what;
    EXPECT_EQ(ones.sample_shape, plain.sample_shape) << what;
    EXPECT_EQ(ones.labels, plain.labels) << what;
    EXPECT_EQ(ones.classes, plain.classes) << what;
    EXPECT_EQ(ones.features.size(), static_cast<std::size_t>(range.rows * row)) << what;
    if (ones.features.size() != static_cast<std::size_t>(range.rows * row)) continue;
    EXPECT_EQ(first_mismatch(
                  range.rows * row, [&](std::int64_t i) { return ones.features[static_cast<std::size_t>(i)]; },
                  [&](std::int64_t i) {
                    const std::int64_t r = i / row, e = i % row;
                    return e == sample ? 1.0f : plain.features[static_cast<std::size_t>(r * sample + e)];
                  }),
              "")
        << what;
  }
}

TEST(DataLoadShard, OnesColumnOnEveryReadPath) {
  check_ones_column<float>("float32", {});
  check_ones_column<float>("float32_halved", spmd::data::FeatureScale::parse("1/2", false));
  check_ones_column<double>("float64", {});
  check_ones_column<std::uint8_t>("uint8", {});
  check_ones_column<std::int16_t>("int16", {});
}

TEST(DataLoadShard, WiderRowsInPiecesLeaveTheGapsAlone) {
  // float32 rows of 5 written 8 floats apart, in pieces of 2 rows, different piece counts per
  // rank (as PiecewiseReadsWithDifferentPieceCountsPerRank); the 3 floats after each row keep
  // the caller's values. A stride below the row is refused on every rank.
  Context ctx = make_context();
  SharedDir dir(ctx);
  const int P = ctx.size();
  const std::int64_t n = 3 * static_cast<std::int64_t>(P) * P + 1, stride = 8;
  const std::string path = dir.file("strided.h5");
  write_dataset<float, std::uint16_t>(ctx, path, n, {5}, 6);
  spmd::data::ShardReader reader(ctx, path, {"images", "labels"});
  reader.set_max_read_bytes(2 * 5 * 4);
  const std::int64_t count = 3 * ctx.rank() + 1, first = n - count - ctx.rank();
  std::vector<float> out(static_cast<std::size_t>(count * stride), -7.0f);
  reader.read_features(first, count, out, stride);
  EXPECT_TRUE(reader.last_read_collective()) << "rank " << ctx.rank();
  EXPECT_EQ(first_mismatch(
                count * stride, [&](std::int64_t i) { return out[static_cast<std::size_t>(i)]; },
                [&](std::int64_t i) {
                  return i % stride < 5 ? expected_float<float>(first + i / stride, i % stride) : -7.0f;
                }),
            "")
      << "rows from " << first;
  EXPECT_THROW(reader.read_features(0, 0, out, 4), spmd::CollectiveError);
}

template <class L>
void check_label_type(const Context& ctx, const SharedDir& dir, const char* name) {
  const std::int64_t n = 3 * ctx.size() + 2;
  const std::string path = dir.file(std::string("labels_") + name + ".h5");
  // Labels 0..6, except the very last row, which holds the maximum 9: inferring classes
  // must see it whichever rank reads that row.
  std::vector<L> labels = labels_of<L>(n, 7);
  labels.back() = 9;
  spmd::data::write_on_root(ctx, path, [&](AtomicH5Writer& w) {
    w.write<float>("x", features_of<float>(n, 1), {n, 1});
    w.write<L>("y", labels, {n});
  });
  for (auto split : {even_split, all_on_last}) {
    const Range range = split(n, ctx.rank(), ctx.size());
    const LoadedShard s = spmd::data::load_shard(ctx, path, {"x", "y"}, range.first, range.rows, 0);
    EXPECT_EQ(s.classes, 10) << name;
    EXPECT_EQ(s.labels.size(), static_cast<std::size_t>(range.rows)) << name;
    EXPECT_EQ(first_mismatch(
                  std::min<std::int64_t>(range.rows, static_cast<std::int64_t>(s.labels.size())),
                  [&](std::int64_t r) { return s.labels[static_cast<std::size_t>(r)]; },
                  [&](std::int64_t r) { return static_cast<std::int32_t>(labels[static_cast<std::size_t>(range.first + r)]); }),
              "")
        << name << " rows from " << range.first;
    const LoadedShard given = spmd::data::load_shard(ctx, path, {"x", "y"}, range.first, range.rows, 10);
    EXPECT_EQ(given.labels, s.labels);
    EXPECT_EQ(given.classes, 10);
  }
  const auto shape = spmd::data::probe_shape(ctx, path, {"x", "y"});
  EXPECT_EQ(shape.labels_type, spmd::data::element_type_v<L>) << name;
}

TEST(DataLoadShard, EveryLabelIntegerTypeAndInferredClasses) {
  Context ctx = make_context();
  SharedDir dir(ctx);
  check_label_type<std::int8_t>(ctx, dir, "int8");
  check_label_type<std::uint8_t>(ctx, dir, "uint8");
  check_label_type<std::int16_t>(ctx, dir, "int16");
  check_label_type<std::uint16_t>(ctx, dir, "uint16");
  check_label_type<std::int32_t>(ctx, dir, "int32");
  check_label_type<std::uint32_t>(ctx, dir, "uint32");
  check_label_type<std::int64_t>(ctx, dir, "int64");
  check_label_type<std::uint64_t>(ctx, dir, "uint64");
}

TEST(DataLoadShard, PiecewiseReadsWithDifferentPieceCountsPerRank) {
  // Pieces of 2 rows: rank r asks for 3r+1 rows (rank 0 one piece, the last rank most),
  // so ranks make different numbers of real reads and must pad with empty ones.
  Context ctx = make_context();
  SharedDir dir(ctx);
  const int P = ctx.size();
  const std::int64_t n = 3 * static_cast<std::int64_t>(P) * P;
  const std::string path = dir.file("pieces.h5");
  write_dataset<double, std::uint16_t>(ctx, path, n, {5}, 6);
  spmd::data::ShardReader reader(ctx, path, {"images", "labels"});
  EXPECT_EQ(reader.shape().rows, n);
  EXPECT_EQ(reader.shape().features_type, ElementType::Float64);
  reader.set_max_read_bytes(2 * 5 * 8);
  const std::int64_t count = 3 * ctx.rank() + 1, first = n - count - ctx.rank();
  std::vector<float> features(static_cast<std::size_t>(count * 5), -1.0f);
  reader.read_features(first, count, features);
  EXPECT_TRUE(reader.last_read_collective()) << "rank " << ctx.rank();
  std::vector<std::int64_t> labels(static_cast<std::size_t>(count), -1);
  reader.read_labels(first, count, labels);
  EXPECT_TRUE(reader.last_read_collective()) << "rank " << ctx.rank();
  EXPECT_EQ(first_mismatch(
                count * 5, [&](std::int64_t i) { return features[static_cast<std::size_t>(i)]; },
                [&](std::int64_t i) { return expected_float<double>(first + i / 5, i % 5); }),
            "")
      << "features from row " << first;
  EXPECT_EQ(first_mismatch(
                count, [&](std::int64_t r) { return labels[static_cast<std::size_t>(r)]; },
                [&](std::int64_t r) { return label_value(first + r, 6); }),
            "")
      << "labels from row " << first;
  // A second call on the same reader, now with only rank 0 reading.
  const std::int64_t again = ctx.rank() == 0 ? n : 0;
  std::vector<float> all(static_cast<std::size_t>(again * 5));
  reader.read_features(0, again, all);
  EXPECT_TRUE(reader.last_read_collective()) << "rank " << ctx.rank() << " (empty selection)";
  EXPECT_EQ(first_mismatch(
                again * 5, [&](std::int64_t i) { return all[static_cast<std::size_t>(i)]; },
                [&](std::int64_t i) { return expected_float<double>(i / 5, i % 5); }),
            "");
}

TEST(DataLoadShard, LabelPiecesAreAgreedWhenOneRankHoldsMoreThanAPiece) {
  // The loader reads labels in pieces of 2^20 rows with collective reads: rank 0 holds one
  // row more than a piece (two pieces), every other rank one row (one piece), so the others
  // must join rank 0's second read with an empty one. Classes are inferred (the agreed largest).
  Context ctx = make_context();
  SharedDir dir(ctx);
  const int P = ctx.size();
  constexpr std::int64_t kPiece = std::int64_t{1} << 20;
  const std::int64_t n = kPiece + P;
  const std::string path = dir.file("label_pieces.h5");
  write_dataset<std::uint8_t, std::uint8_t>(ctx, path, n, {1}, 3);
  const Range range = ctx.rank() == 0 ? Range{0, kPiece + 1} : Range{kPiece + ctx.rank(), 1};
  const LoadedShard s = spmd::data::load_shard(ctx, path, {"images", "labels"}, range.first, range.rows, 0);
  EXPECT_EQ(s.classes, 3);
  ASSERT_EQ(s.labels.size(), static_cast<std::size_t>(range.rows));
  EXPECT_EQ(first_mismatch(
                range.rows, [&](std::int64_t r) { return std::int64_t{s.labels[static_cast<std::size_t>(r)]}; },
                [&](std::int64_t r) { return label_value(range.first + r, 3); }),
            "")
      << "rank " << ctx.rank();
  std::int64_t total = 0;
  for (auto c : s.class_counts) total += c;
  EXPECT_EQ(total, n) << "class counts over all ranks";
}

TEST(DataLoadShard, FeaturesOnlyAndProbeShape) {
  Context ctx = make_context();
  SharedDir dir(ctx);
  const std::string path = dir.file("probe.h5");
  write_dataset<std::uint8_t, std::int16_t>(ctx, path, 23, {4, 4, 1}, 3);
  const auto shape = spmd::data::probe_shape(ctx, path, {"images", "labels"});
  EXPECT_EQ(shape.rows, 23);
  EXPECT_EQ(shape.sample_shape, (std::vector<std::int64_t>{4, 4, 1}));
  EXPECT_EQ(shape.sample_size, 16);
  EXPECT_EQ(shape.features_type, ElementType::UInt8);
  EXPECT_EQ(shape.labels_type, ElementType::Int16);
  const auto serial = spmd::data::probe_shape(path, {"images", ""});
  EXPECT_EQ(serial.rows, 23);
  EXPECT_EQ(serial.sample_shape, shape.sample_shape);
  EXPECT_FALSE(serial.labels_type.has_value());
  const Range range = even_split(23, ctx.rank(), ctx.size());
  const LoadedShard s = spmd::data::load_features(ctx, path, "images", range.first, range.rows);
  EXPECT_TRUE(s.labels.empty());
  EXPECT_EQ(s.classes, 0);
  ASSERT_EQ(s.features.size(), static_cast<std::size_t>(range.rows * 16));
  for (std::int64_t i = 0; i < range.rows * 16; ++i)
    ASSERT_EQ(s.features[static_cast<std::size_t>(i)], expected_float<std::uint8_t>(range.first + i / 16, i % 16));
}

// ---- validation: every rank throws the same CollectiveError -------------------------

template <class Fn>
std::string collective_error(const Context& ctx, Fn&& fn) {
  std::string message;
  try {
    fn();
    ADD_FAILURE() << "rank " << ctx.rank() << ": no error";
  } catch (const spmd::CollectiveError& e) {
    message = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << ctx.rank() << ": not a CollectiveError: " << e.what();
  }
  // Every rank must have arrived here; a rank left behind would hang the barrier (and the
  // watchdog would abort the test).
  MPI_Barrier(ctx.comm());
  return message;
}

void expect_mentions(const std::string& message, std::initializer_list<std::string> needles) {
  for (const auto& n : needles) EXPECT_NE(message.find(n), std::string::npos) << "missing '" << n << "' in: " << message;
}

class DataLoadShardErrors : public ::testing::Test {
 protected:
  DataLoadShardErrors() : ctx_(make_context()), dir_(ctx_) {}
  template <class Fill>
  std::string write(const std::string& name, Fill&& fill) {
    const std::string path = dir_.file(name);
    spmd::data::write_on_root(ctx_, path, fill);
    return path;
  }
  std::string load_error(const std::string& path, DatasetKeys keys, int classes = 5) {
    const Range range = even_split(12, ctx_.rank(), ctx_.size());
    return collective_error(ctx_, [&] { spmd::data::load_shard(ctx_, path, keys, range.first, range.rows, classes); });
  }
  Context ctx_;
  SharedDir dir_;
};

TEST_F(DataLoadShardErrors, MissingFileAndNotHdf5) {
  std::string msg = load_error(dir_.file("absent.h5"), {"images", "labels"});
  expect_mentions(msg, {"absent.h5", "images", "labels", "does not exist"});
  msg = collective_error(ctx_, [&] { spmd::data::probe_shape(ctx_, dir_.file("absent.h5"), {"X", "y"}); });
  expect_mentions(msg, {"absent.h5", "'X'", "'y'"});
  const std::string text = dir_.file("notes.h5");
  if (ctx_.is_root()) std::ofstream(text) << "this is not HDF5\n";
  MPI_Barrier(ctx_.comm());
  msg = load_error(text, {"images", "labels"});
  expect_mentions(msg, {"notes.h5", "images", "not an HDF5 file"});
}

TEST_F(DataLoadShardErrors, MissingDatasetsListWhatExists) {
  const std::string path = write("keys.h5", [](AtomicH5Writer& w) {
    w.write<float>("images", features_of<float>(12, 2), {12, 2});
    w.write<std::int32_t>("labels", labels_of<std::int32_t>(12, 5), {12});
    w.write<float>("extra/thing", std::vector<float>{1}, {1});
  });
  std::string msg = load_error(path, {"pixels", "labels"});
  expect_mentions(msg, {"keys.h5", "'pixels'", "features", "/images", "/labels", "/extra/thing"});
  msg = load_error(path, {"images", "targets"});
  expect_mentions(msg, {"keys.h5", "'targets'", "labels", "/images"});
  msg = load_error(path, {"extra", "labels"});  // a group, not a dataset
  expect_mentions(msg, {"keys.h5", "'extra'"});
}

TEST_F(DataLoadShardErrors, WrongRanksDtypesCountsAndEmpty) {
  const std::string path = write("shapes.h5", [](AtomicH5Writer& w) {
    w.write<float>("images", features_of<float>(12, 2), {12, 2});
    w.write<float>("flat", features_of<float>(12, 1), {12});
    w.write<std::int32_t>("labels", labels_of<std::int32_t>(12, 5), {12});
    w.write<std::int32_t>("pair_labels", labels_of<std::int32_t>(24, 5), {12, 2});
    w.write<float>("float_labels", std::vector<float>(12, 1.5f), {12});  // whole-number floats are read
    w.write<std::int32_t>("short_labels", labels_of<std::int32_t>(11, 5), {11});
    w.write<float>("no_images", std::vector<float>{}, {0, 2});
    w.write<std::int32_t>("no_labels", std::vector<std::int32_t>{}, {0});
  });
  expect_mentions(load_error(path, {"images", "pair_labels"}), {"shapes.h5", "pair_labels", "[12, 2]", "(2-D)", "1-D"});
  expect_mentions(load_error(path, {"flat", "labels"}), {"shapes.h5", "flat", "[12]", "at least 2-D"});
  expect_mentions(load_error(path, {"images", "float_labels"}), {"shapes.h5", "float_labels", "row 0", "1.5", "whole numbers"});
  expect_mentions(load_error(path, {"images", "short_labels"}), {"shapes.h5", "images", "short_labels", "12 rows", "11"});
  expect_mentions(load_error(path, {"no_images", "no_labels"}), {"shapes.h5", "no_images", "empty"});
}

// Labels as users' files hold them: a column [N, 1] (sklearn, pandas) and h5py's bool (an
// HDF5 enum over int8) load as the same labels as a plain [N] int32 column, on every split.
TEST_F(DataLoadShardErrors, ColumnAndEnumLabelsLoadAsTheirIntegers) {
  const auto labels = labels_of<std::int32_t>(12, 5);
  std::vector<std::int8_t> bits(12);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::int8_t>(labels[i] % 2);
  const std::string path = write("user_labels.h5", [&](AtomicH5Writer& w) {
    w.write<float>("images", features_of<float>(12, 2), {12, 2});
    w.write<std::int32_t>("labels", labels, {12});
    w.write<std::int32_t>("column", labels, {12, 1});
  });
  {  // h5py's bool: enum {FALSE = 0, TRUE = 1} over int8, added with the C API.
    if (ctx_.rank() == 0) {
      hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      hid_t type = H5Tenum_create(H5T_NATIVE_INT8);
      std::int8_t v = 0;
      H5Tenum_insert(type, "FALSE", &v);
      v = 1;
      H5Tenum_insert(type, "TRUE", &v);
      const hsize_t n = 12;
      hid_t space = H5Screate_simple(1, &n, nullptr);
      hid_t ds = H5Dcreate2(file, "bool", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      ASSERT_GE(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits.data()), 0);  // enum values as stored
      H5Dclose(ds);
      H5Sclose(space);
      H5Tclose(type);
      H5Fclose(file);
    }
    MPI_Barrier(ctx_.comm());
  }
  const Range range = even_split(12, ctx_.rank(), ctx_.size());
  const auto plain = spmd::data::load_shard(ctx_, path, {"images", "labels"}, range.first, range.rows, 0);
  const auto column = spmd::data::load_shard(ctx_, path, {"images", "column"}, range.first, range.rows, 0);
  EXPECT_EQ(column.labels, plain.labels);
  EXPECT_EQ(column.classes, plain.classes);
  const auto flags = spmd::data::load_shard(ctx_, path, {"images", "bool"}, range.first, range.rows, 0);
  ASSERT_EQ(flags.labels.size(), plain.labels.size());
  for (std::size_t i = 0; i < flags.labels.size(); ++i) EXPECT_EQ(flags.labels[i], plain.labels[i] % 2) << i;
  EXPECT_EQ(flags.classes, 2);
}

// Ids instead of class indices: refused (inferred classes) above label_bound, naming the
// row; below it, the classes without an example are counted in a warning.
TEST_F(DataLoadShardErrors, IdsAsLabelsAreRefusedOrWarnedAbout) {
  std::vector<std::int64_t> labels = labels_of<std::int64_t>(12, 3);
  for (auto& l : labels) l += 1001;
  const std::string ids = write("ids.h5", [&](AtomicH5Writer& w) {
    w.write<float>("images", features_of<float>(12, 2), {12, 2});
    w.write<std::int64_t>("labels", labels, {12});
  });
  const Range range = even_split(12, ctx_.rank(), ctx_.size());
  const auto shard = spmd::data::load_shard(ctx_, ids, {"images", "labels"}, range.first, range.rows, 0);
  EXPECT_EQ(shard.classes, 1004);
  ASSERT_EQ(shard.warnings.size(), 1u);
  expect_mentions(shard.warnings[0], {"ids.h5", "1001 of the 1004 inferred classes", "--classes"});
  std::int64_t total = 0;
  for (auto c : shard.class_counts) total += c;
  EXPECT_EQ(total, 12);
  labels[5] = std::int64_t{1} << 40;
  const std::string huge = write("huge_id.h5", [&](AtomicH5Writer& w) {
    w.write<float>("images", features_of<float>(12, 2), {12, 2});
    w.write<std::int64_t>("labels", labels, {12});
  });
  expect_mentions(load_error(huge, {"images", "labels"}, 0),
                  {"huge_id.h5", "row 5", "label 1099511627776", "above the largest class index", "np.unique"});
  // The bound itself (label_bound(12) = 1024): 1023 is still a class, 1024 is refused.
  EXPECT_EQ(spmd::data::label_bound(12), 1024);
  for (const std::int64_t top : {std::int64_t{1023}, std::int64_t{1024}}) {
    labels = labels_of<std::int64_t>(12, 3);
    labels[7] = top;
    const std::string edge = write("edge_" + std::to_string(top) + ".h5", [&](AtomicH5Writer& w) {
      w.write<float>("images", features_of<float>(12, 2), {12, 2});
      w.write<std::int64_t>("labels", labels, {12});
    });
    if (top == 1023) {
      EXPECT_EQ(spmd::data::load_shard(ctx_, edge, {"images", "labels"}, range.first, range.rows, 0).classes, 1024);
    } else {
      expect_mentions(load_error(edge, {"images", "labels"}, 0),
                      {"edge_1024.h5", "row 7", "label 1024", "above the largest class index", "(1023)"});
    }
  }
}

TEST_F(DataLoadShardErrors, LabelOutOfRangeOnOneRankStopsAllRanks) {
  // The bad label sits in the last rank's first row (split of 12 rows); only that rank
  // sees it, every rank must throw.
  const int P = ctx_.size();
  const Range last = even_split(12, P - 1, P);
  for (const std::int64_t bad : {std::int64_t{5}, std::int64_t{-1}, std::int64_t{1} << 40}) {
    std::vector<std::int64_t> labels = labels_of<std::int64_t>(12, 5);
    labels[static_cast<std::size_t>(last.first)] = bad;
    const std::string path = write("bad_label.h5", [&](AtomicH5Writer& w) {
      w.write<float>("images", features_of<float>(12, 2), {12, 2});
      w.write<std::int64_t>("labels", labels, {12});
    });
    const std::string msg = load_error(path, {"images", "labels"}, 5);
    expect_mentions(msg, {"bad_label.h5", "labels", "rank " + std::to_string(P - 1), "row " + std::to_string(last.first),
                          "label " + std::to_string(bad), "[0, 5)"});
  }
  // Inferred classes: a negative label is still out of range.
  std::vector<std::int64_t> labels = labels_of<std::int64_t>(12, 5);
  labels[static_cast<std::size_t>(last.first)] = -3;
  const std::string path = write("negative.h5", [&](AtomicH5Writer& w) {
    w.write<float>("images", features_of<float>(12, 2), {12, 2});
    w.write<std::int64_t>("labels", labels, {12});
  });
  expect_mentions(load_error(path, {"images", "labels"}, 0), {"negative.h5", "labels", "label -3", "inferred"});
}

TEST_F(DataLoadShardErrors, NonFiniteFeatureOnOneRankStopsAllRanks) {
  const int P = ctx_.size();
  const Range middle = even_split(12, P / 2, P);
  const std::int64_t bad_row = middle.first + middle.rows - 1;
  auto f32 = features_of<float>(12, 2);
  f32[static_cast<std::size_t>(bad_row * 2 + 1)] = std::numeric_limits<float>::quiet_NaN();
  std::string path = write("nan32.h5", [&](AtomicH5Writer& w) {
    w.write<float>("images", f32, {12, 2});
    w.write<std::int32_t>("labels", labels_of<std::int32_t>(12, 5), {12});
  });
  expect_mentions(load_error(path, {"images", "labels"}),
                  {"nan32.h5", "images", "rank " + std::to_string(P / 2), "row " + std::to_string(bad_row), "non-finite"});
  auto f64 = features_of<double>(12, 2);
  f64[static_cast<std::size_t>(11 * 2)] = -std::numeric_limits<double>::infinity();
  path = write("inf64.h5", [&](AtomicH5Writer& w) {
    w.write<double>("images", f64, {12, 2});
    w.write<std::int32_t>("labels", labels_of<std::int32_t>(12, 5), {12});
  });
  expect_mentions(load_error(path, {"images", "labels"}), {"inf64.h5", "images", "row 11", "non-finite"});
  f64[static_cast<std::size_t>(11 * 2)] = 1e300;  // finite, but not as float32
  path = write("big64.h5", [&](AtomicH5Writer& w) {
    w.write<double>("images", f64, {12, 2});
    w.write<std::int32_t>("labels", labels_of<std::int32_t>(12, 5), {12});
  });
  expect_mentions(load_error(path, {"images", "labels"}), {"big64.h5", "images", "row 11", "float32 range"});
}

TEST_F(DataLoadShardErrors, BadRangeOnOneRankStopsAllRanks) {
  const std::string path = write("range.h5", [](AtomicH5Writer& w) {
    w.write<float>("images", features_of<float>(12, 2), {12, 2});
    w.write<std::int32_t>("labels", labels_of<std::int32_t>(12, 5), {12});
  });
  const int last = ctx_.size() - 1;
  Range r = even_split(12, ctx_.rank(), ctx_.size());
  if (ctx_.rank() == last) r.rows += 1;  // one row past the end
  std::string msg = collective_error(ctx_, [&] { spmd::data::load_shard(ctx_, path, {"images", "labels"}, r.first, r.rows, 5); });
  expect_mentions(msg, {"range.h5", "images", "rank " + std::to_string(last), "12 rows"});
  msg = collective_error(ctx_, [&] {
    spmd::data::load_shard(ctx_, path, {"images", "labels"}, ctx_.rank() == last ? -1 : 0, 0, 5);
  });
  expect_mentions(msg, {"range.h5", "rank " + std::to_string(last)});
}

TEST_F(DataLoadShardErrors, WriteOnRootFailureReachesEveryRankAndLeavesNoFile) {
  const std::string path = dir_.file("partial.h5");
  const std::string msg = collective_error(ctx_, [&] {
    spmd::data::write_on_root(ctx_, path, [](AtomicH5Writer& w) {
      w.write<float>("half", std::vector<float>{1, 2}, {2});
      throw spmd::Error("simulated failure while filling");
    });
  });
  expect_mentions(msg, {"partial.h5", "simulated failure"});
  if (ctx_.is_root()) EXPECT_TRUE(dir_.entries().empty());
}

}  // namespace
