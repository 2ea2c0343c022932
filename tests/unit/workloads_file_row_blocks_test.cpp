// spmd eval's rows streamed from a file (file_row_blocks.hpp) against the rows written:
// every evaluated row once, in order, as stored (uint8 stays one byte), with --drop-label's
// compaction; a pass's memory bounded by depth + 1 buffers whatever its length; a refused
// value and a file that changed under the run failing the stream with the row named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include "spmd/data/h5_writer.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/sharding/buffer_pool.hpp"
#include "spmd/workloads/file_row_blocks.hpp"

using namespace spmd;
using workloads::BlockReader;
using workloads::FileRows;
using workloads::RowBlock;
using workloads::RowBlocks;

namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("spmd-file-blocks-" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// n rows of 3 values: row i holds (i % 251, 7, i / 251) as T.
template <class T>
std::vector<T> rows_of(std::int64_t n) {
  std::vector<T> x;
  for (std::int64_t i = 0; i < n; ++i)
    for (const std::int64_t v : {i % 251, std::int64_t{7}, i / 251}) x.push_back(static_cast<T>(v));
  return x;
}

template <class T>
data::DatasetShape write_rows(const std::string& path, const std::vector<T>& x, std::int64_t n) {
  data::AtomicH5Writer w(path);
  w.write("x", x, {n, 3});
  w.commit();
  data::DatasetShape shape;
  shape.rows = n;
  shape.sample_shape = {3};
  shape.sample_size = 3;
  shape.features_type = data::element_type_v<T>;
  return shape;
}

FileRows file_rows(const std::string& path, const data::DatasetShape& shape, std::int64_t first, std::int64_t count,
                   const std::vector<std::int32_t>& labels) {
  FileRows r;
  r.path = path;
  r.features_key = "x";
  r.shape = shape;
  r.first_file_row = first;
  r.file_rows = count;
  r.labels = labels;
  return r;
}

}  // namespace

TEST(BufferPool, ReservedBuffersAreUsedInTurnAndReturnWhenDropped) {
  auto pool = sharding::BufferPool::make(64);
  pool->reserve(3);
  EXPECT_EQ(pool->allocated(), 3u);
  std::set<std::byte*> seen;
  {
    auto a = pool->acquire();
    seen.insert(a.get());
    for (int i = 0; i < 5; ++i) {
      auto b = pool->acquire();  // a stays held: b cycles through the other two, oldest first
      seen.insert(b.get());
    }
  }
  EXPECT_EQ(seen.size(), 3u) << "every reserved buffer is used";
  EXPECT_EQ(pool->allocated(), 3u) << "none allocated beyond the reserve";
  auto x = pool->acquire(), y = pool->acquire(), z = pool->acquire(), w = pool->acquire();
  EXPECT_EQ(pool->allocated(), 4u) << "a fourth held at once is allocated";
  std::weak_ptr<sharding::BufferPool> alive = pool;
  pool.reset();
  EXPECT_FALSE(alive.expired()) << "handles keep their pool";
  x.reset(), y.reset(), z.reset(), w.reset();
  EXPECT_TRUE(alive.expired());
}

TEST(FileRowBlocks, EveryRowOnceInOrderAsStored) {
  TempDir dir;
  const std::int64_t n = 1000;
  const auto x = rows_of<std::uint8_t>(n);
  const auto shape = write_rows(dir.file("u8.h5"), x, n);
  const std::vector<std::pair<std::int64_t, std::int64_t>> ranges{{0, 1000}, {333, 334}, {999, 1}, {500, 0}};
  for (const auto& [first, count] : ranges) {
    std::vector<std::int32_t> labels(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(first + i);
    // A shorter first block (eval's first step, read before the devices can start) or none.
    for (const auto& [block_rows, first_block] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 0}, {7, 0}, {64, 0}, {5000, 0}, {7, 3}, {64, 64}, {5000, 1}}) {
      const FileRows rows = file_rows(dir.file("u8.h5"), shape, first, count, labels);
      RowBlocks blocks(workloads::file_blocks(rows, block_rows, 2, first_block), 2);
      EXPECT_EQ(blocks.empty().columns[0].shape(), (sharding::Shape{0, 3}));
      std::int64_t next = 0;
      std::set<const void*> buffers;
      while (auto b = blocks.next()) {
        ASSERT_EQ(b->first, next);
        ASSERT_EQ(b->rows, std::min(next == 0 && first_block > 0 ? first_block : block_rows, count - next));
        ASSERT_EQ(b->columns[0].dtype(), sharding::DType::UInt8);
        ASSERT_EQ(b->columns[0].shape(), (sharding::Shape{b->rows, 3}));  // one byte a value, as stored
        const auto bytes = b->columns[0].data<std::uint8_t>();
        const auto y = b->columns[1].data<std::int32_t>();
        for (std::int64_t r = 0; r < b->rows; ++r) {
          const std::int64_t file_row = first + next + r;
          for (int k = 0; k < 3; ++k)
            ASSERT_EQ(bytes[static_cast<std::size_t>(r * 3 + k)], x[static_cast<std::size_t>(file_row * 3 + k)])
                << file_row;
          ASSERT_EQ(y[static_cast<std::size_t>(r)], file_row);
        }
        if (b->owner) buffers.insert(b->owner.get());
        next += b->rows;
        if (b->rows == 0) break;
      }
      EXPECT_EQ(next, count) << "rows [" << first << ", " << first + count << ") in blocks of " << block_rows;
      EXPECT_LE(buffers.size(), 3u) << "a pass uses at most depth + 1 buffers";
    }
  }
}

// Through BlockReader, as the loops read: however many blocks, the same depth + 1 buffers.
TEST(FileRowBlocks, MemoryIsDepthPlusOneBuffersWhateverThePassLength) {
  TempDir dir;
  const std::int64_t n = 4000;
  const auto x = rows_of<float>(n);
  const auto shape = write_rows(dir.file("f32.h5"), x, n);
  const std::vector<std::int32_t> labels(static_cast<std::size_t>(n), 1);
  for (const std::size_t depth : {1u, 2u, 4u}) {
    RowBlocks blocks(workloads::file_blocks(file_rows(dir.file("f32.h5"), shape, 0, n, labels), 10, depth), depth);
    BlockReader reader(blocks, 10);
    std::set<const void*> buffers;
    for (std::int64_t first = 0; first < n; first += 10) {
      const RowBlock* b = reader.rows(first, 10);
      ASSERT_NE(b, nullptr) << reader.error();
      ASSERT_EQ(b->columns[0].data<std::uint8_t>().size(), 10u * 3u * sizeof(float));
      float v = 0;
      std::memcpy(&v, b->columns[0].bytes(), sizeof v);
      ASSERT_EQ(v, static_cast<float>(first % 251));
      buffers.insert(b->owner.get());
    }
    EXPECT_EQ(buffers.size(), depth + 1) << "depth " << depth << ": 400 blocks in depth + 1 buffers";
  }
}

TEST(FileRowBlocks, DropLabelCompactsTheKeptRows) {
  TempDir dir;
  const std::int64_t n = 300;
  const auto x = rows_of<std::int16_t>(n);
  const auto shape = write_rows(dir.file("i16.h5"), x, n);
  // The rank's rows are file rows [50, 250); keep the ones not divisible by 3, and a long gap.
  std::vector<std::int64_t> kept;
  for (std::int64_t i = 0; i < 200; ++i)
    if (i % 3 != 0 && (i < 60 || i > 170)) kept.push_back(i);
  std::vector<std::int32_t> labels;
  for (auto k : kept) labels.push_back(static_cast<std::int32_t>(k));
  for (const std::int64_t block_rows : {1, 4, 16, 1000}) {
    FileRows r = file_rows(dir.file("i16.h5"), shape, 50, 200, labels);
    r.every_row = false;
    r.kept = kept;
    RowBlocks blocks(workloads::file_blocks(r, block_rows, 2), 2);
    std::size_t next = 0;
    while (auto b = blocks.next()) {
      const auto* values = reinterpret_cast<const std::int16_t*>(b->columns[0].bytes());
      for (std::int64_t i = 0; i < b->rows; ++i, ++next) {
        const std::int64_t file_row = 50 + kept[next];
        for (int k = 0; k < 3; ++k)
          ASSERT_EQ(values[i * 3 + k], x[static_cast<std::size_t>(file_row * 3 + k)]) << "row " << file_row;
        ASSERT_EQ(b->columns[1].data<std::int32_t>()[static_cast<std::size_t>(i)], kept[next]);
      }
    }
    EXPECT_EQ(next, kept.size()) << "blocks of " << block_rows;
  }
}

TEST(FileRowBlocks, RefusedValuesAndChangedFilesFailTheStreamNamingTheRow) {
  TempDir dir;
  const std::int64_t n = 100;
  auto x = rows_of<double>(n);
  x[static_cast<std::size_t>(77 * 3 + 2)] = std::numeric_limits<double>::infinity();
  const auto shape = write_rows(dir.file("f64.h5"), x, n);
  const std::vector<std::int32_t> labels(static_cast<std::size_t>(n - 10), 0);
  RowBlocks blocks(workloads::file_blocks(file_rows(dir.file("f64.h5"), shape, 10, n - 10, labels), 16, 2), 2);
  BlockReader reader(blocks, 16);
  for (std::int64_t first = 0; first < 64; first += 16) ASSERT_NE(reader.rows(first, 16), nullptr) << reader.error();
  EXPECT_EQ(reader.rows(64, 16), nullptr);  // file rows 74..89
  EXPECT_NE(reader.error().find("f64.h5': features dataset 'x': row 77 has a non-finite value (inf) at element 2"),
            std::string::npos)
      << reader.error();

  // The file was replaced by one of another shape since it was probed.
  auto other = shape;
  other.rows = 200;
  const std::vector<std::int32_t> more(200, 0);
  RowBlocks changed(workloads::file_blocks(file_rows(dir.file("f64.h5"), other, 0, 200, more), 16, 2), 2);
  BlockReader changed_reader(changed, 16);
  EXPECT_EQ(changed_reader.rows(0, 16), nullptr);
  EXPECT_NE(changed_reader.error().find("now has shape [100, 3], not the [200, 3]"), std::string::npos)
      << changed_reader.error();
  // ... or by one of the same shape and another dtype (HDF5 would convert the values silently).
  auto retyped = shape;
  retyped.features_type = spmd::data::ElementType::UInt8;
  RowBlocks retyped_blocks(workloads::file_blocks(file_rows(dir.file("f64.h5"), retyped, 10, n - 10, labels), 16, 2), 2);
  BlockReader retyped_reader(retyped_blocks, 16);
  EXPECT_EQ(retyped_reader.rows(0, 16), nullptr);
  EXPECT_NE(retyped_reader.error().find("now has dtype float64, not the uint8"), std::string::npos)
      << retyped_reader.error();
  // Labels that do not match the rows fail the stream too (never the call: see the header).
  RowBlocks mismatched(workloads::file_blocks(file_rows(dir.file("f64.h5"), shape, 0, 5, more), 16, 2), 2);
  EXPECT_THROW(mismatched.next(), Error);
}

TEST(FileRowBlocks, ARankThatKeepsNoRowGetsOneEmptyBlock) {
  TempDir dir;
  const auto x = rows_of<float>(10);
  const auto shape = write_rows(dir.file("f32.h5"), x, 10);
  FileRows r = file_rows(dir.file("f32.h5"), shape, 0, 10, {});
  r.every_row = false;  // --drop-label dropped all ten
  RowBlocks blocks(workloads::file_blocks(r, 4, 2), 2);
  const auto b = blocks.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->rows, 0);
  EXPECT_FALSE(blocks.next().has_value());
}
