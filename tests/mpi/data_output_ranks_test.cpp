// ParallelH5Writer and OutputSet on every rank (tests/unit/data_output_test.cpp has the
// one-process writers): every rank writes its rows into a temporary beside the final name;
// a writer destroyed without commit or a failure on one rank leaves the file the final name
// held byte for byte and no temporary; commit or publish puts the new rows there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <stdexcept>

#include "spmd/data/h5_parallel_writer.hpp"
#include "spmd/data/h5_reader.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "test_folder.hpp"

using namespace spmd;
namespace fs = std::filesystem;

namespace {

// A folder every rank shares: rank 0 names, makes and removes it.
std::filesystem::path shared_folder_name(const runtime::Context& ctx) {
  std::string path = (fs::temp_directory_path() / ("spmd-pwriter-" + std::to_string(::getpid()))).string();
  runtime::broadcast(ctx, path);
  return path;
}
struct SharedFolder : test::TestFolder {
  explicit SharedFolder(const runtime::Context& ctx) : TestFolder(shared_folder_name(ctx), ctx.is_root()), ctx_(ctx) {
    MPI_Barrier(ctx.comm());
  }
  ~SharedFolder() { MPI_Barrier(ctx_.comm()); }  // before rank 0 removes it
  const runtime::Context& ctx_;
};

using test::file_bytes;

// Dataset "v" of n rows, row i = value + i; each rank writes one contiguous range of it.
void write_values(data::ParallelH5Writer& w, const runtime::Context& ctx, std::int64_t n, std::int32_t value) {
  const std::int64_t per = (n + ctx.size() - 1) / ctx.size();
  const std::int64_t first = std::min<std::int64_t>(n, per * ctx.rank());
  const std::int64_t rows = std::min<std::int64_t>(per, n - first);
  std::vector<std::int32_t> mine(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) mine[static_cast<std::size_t>(i)] = value + static_cast<std::int32_t>(first + i);
  w.write_rows<std::int32_t>("v", {n}, first, rows, mine);
}

std::vector<std::int32_t> read_values(const std::string& path) { return data::H5Reader(path).read<std::int32_t>("v"); }

std::vector<std::int32_t> expected_values(std::int64_t n, std::int32_t value) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = value + static_cast<std::int32_t>(i);
  return v;
}

// The file of `n` values from `value` on, committed by every rank.
void commit_values(const runtime::Context& ctx, const std::string& path, std::int64_t n, std::int32_t value) {
  data::ParallelH5Writer w(ctx, path, 4096);
  write_values(w, ctx, n, value);
  w.commit();
}

// The temporary of `name` while rank 0's writer is open: '.NAME.tmp.PID'.
bool only_the_temporary_beside(const std::vector<std::string>& entries, const std::string& name) {
  const std::regex temp("\\." + std::regex_replace(name, std::regex("\\."), "\\.") + "\\.tmp\\.[0-9]+");
  return entries.size() == 2 && entries[1] == name && std::regex_match(entries[0], temp);
}

}  // namespace

TEST(ParallelH5Writer, RanksWriteATemporaryThatReplacesTheFileOnlyAtCommit) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 1, 60.0});
  SharedFolder dir(ctx);
  const std::string path = dir.file("pred.h5");
  commit_values(ctx, path, 11, 100);
  ASSERT_EQ(read_values(path), expected_values(11, 100));
  const std::string before = file_bytes(path);
  {
    data::ParallelH5Writer w(ctx, path, 4096);
    write_values(w, ctx, 11, 200);
    MPI_Barrier(ctx.comm());
    EXPECT_EQ(file_bytes(path), before) << "written through the final name";
    EXPECT_TRUE(only_the_temporary_beside(dir.entries(), "pred.h5")) << dir.entries().size() << " entries";
    MPI_Barrier(ctx.comm());
    w.commit();
  }
  EXPECT_EQ(read_values(path), expected_values(11, 200));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"pred.h5"});
}

TEST(ParallelH5Writer, AWriterDestroyedWithoutCommitOrAFailureOnOneRankKeepsTheOldFile) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 1, 60.0});
  SharedFolder dir(ctx);
  const std::string path = dir.file("pred.h5");
  commit_values(ctx, path, 7, 1);
  const std::string before = file_bytes(path);
  {
    data::ParallelH5Writer w(ctx, path, 4096);
    write_values(w, ctx, 7, 2);
  }  // unwinding without commit
  MPI_Barrier(ctx.comm());
  EXPECT_EQ(file_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"pred.h5"});
  // A write refused on the last rank only (more values than its rows): agreed, every rank throws.
  EXPECT_THROW(
      {
        data::ParallelH5Writer w(ctx, path, 4096);
        const bool last = ctx.rank() == ctx.size() - 1;
        const std::vector<std::int32_t> v(last ? 3 : 0, 5);
        w.write_rows<std::int32_t>("v", {7}, 0, last ? 2 : 0, v);
        w.commit();
      },
      CollectiveError);
  MPI_Barrier(ctx.comm());
  EXPECT_EQ(file_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"pred.h5"});
}

TEST(OutputSetRanks, ACollectiveOutputAndATextAppearTogetherOrNotAtAll) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 1, 60.0});
  SharedFolder dir(ctx);
  const std::string h5 = dir.file("pred.h5"), json = dir.file("run.json");
  if (ctx.is_root()) std::ofstream(json) << "old\n";
  commit_values(ctx, h5, 5, 1);
  const std::string before = file_bytes(h5);
  {
    data::OutputSet set(ctx);
    data::ParallelH5Writer w(ctx, h5, 4096);
    write_values(w, ctx, 5, 2);
    w.commit(&set);
    set.write_text(json, "new\n");
    MPI_Barrier(ctx.comm());
    EXPECT_EQ(file_bytes(h5), before);
    EXPECT_EQ(file_bytes(json), "old\n");
    EXPECT_EQ(dir.entries().size(), 4u);
    MPI_Barrier(ctx.comm());
  }  // destroyed before publish
  MPI_Barrier(ctx.comm());  // rank 0 removes the temporaries in its destructor
  EXPECT_EQ(file_bytes(h5), before);
  EXPECT_EQ(file_bytes(json), "old\n");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"pred.h5", "run.json"}));
  {
    data::OutputSet set(ctx);
    data::ParallelH5Writer w(ctx, h5, 4096);
    write_values(w, ctx, 5, 3);
    w.commit(&set);
    set.write_text(json, "new\n");
    set.publish();
  }
  EXPECT_EQ(read_values(h5), expected_values(5, 3));
  EXPECT_EQ(file_bytes(json), "new\n");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"pred.h5", "run.json"}));
}
