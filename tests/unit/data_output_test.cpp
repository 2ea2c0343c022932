// The atomic outputs in one process, in milliseconds (tests/cli/faults.sh checks the same
// promises end to end, in minutes): while an output is written its bytes go to a temporary
// beside the final name; a failure (a throw inside the fill, a writer destroyed without
// commit, an OutputSet destroyed before publish) leaves the file the final name held byte for
// byte and no temporary; a commit or publish puts the new content under the final name and
// leaves no temporary. And data::require_safe_outputs' rules, case by case.
#include <gtest/gtest.h>
#include <mpi.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "spmd/data/h5_reader.hpp"
#include "spmd/data/h5_writer.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/data/output_targets.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "test_folder.hpp"

namespace {

namespace fs = std::filesystem;
using spmd::data::AtomicH5Writer;
using spmd::data::FileArgument;
using spmd::data::OutputSet;

using Folder = spmd::test::TestFolder;
using spmd::test::file_bytes;

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string temp_name_of(const std::string& name) { return "." + name + ".tmp." + std::to_string(::getpid()); }

// An HDF5 file holding one int32 `step`.
void write_step(const std::string& path, std::int32_t step, spmd::data::OutputSet* set = nullptr) {
  AtomicH5Writer w(path);
  w.write<std::int32_t>("step", std::vector<std::int32_t>{step}, {1});
  w.commit(set);
}

std::int32_t step_in(const std::string& path) { return spmd::data::H5Reader(path).read<std::int32_t>("step").at(0); }

}  // namespace

TEST(DataOutput, WriteTextGoesThroughATemporaryAndReplacesTheFileWhole) {
  Folder dir("spmd-output");
  const std::string path = dir.file("report.json");
  put(path, "old contents, longer than the new ones\n");
  const std::string tmp = spmd::data::write_text_temporary(path, "{\"new\": 1}\n");
  EXPECT_NE(tmp, path);
  EXPECT_EQ(fs::path(tmp).filename().string(), temp_name_of("report.json"));
  EXPECT_EQ(file_bytes(path), "old contents, longer than the new ones\n") << "the final name changed before the rename";
  EXPECT_EQ(file_bytes(tmp), "{\"new\": 1}\n");
  fs::remove(tmp);

  spmd::data::write_text_atomic(path, "{\"new\": 2}\n");
  EXPECT_EQ(file_bytes(path), "{\"new\": 2}\n");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"report.json"});
}

TEST(DataOutput, WriteTextThatFailsLeavesTheOldFileAndNoTemporary) {
  Folder dir("spmd-output");
  const std::string path = dir.file("report.json");
  put(path, "old\n");
  // The temporary's name is taken by a folder: the open fails after the checks.
  fs::create_directory(dir.file(temp_name_of("report.json")));
  EXPECT_THROW(spmd::data::write_text_atomic(path, "new\n"), spmd::Error);
  EXPECT_EQ(file_bytes(path), "old\n");
  fs::remove(dir.file(temp_name_of("report.json")));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"report.json"});
}

TEST(DataOutput, H5WriterFailuresKeepTheOldFileByteForByte) {
  Folder dir("spmd-output");
  const std::string path = dir.file("weights.h5");
  write_step(path, 7);
  const std::string before = file_bytes(path);
  {  // destroyed without commit
    AtomicH5Writer w(path);
    EXPECT_NE(w.temp_path(), path);
    w.write<std::int32_t>("step", std::vector<std::int32_t>{8}, {1});
    EXPECT_TRUE(fs::exists(w.temp_path()));
    EXPECT_EQ(file_bytes(path), before) << "written through the final name";
  }
  EXPECT_EQ(file_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"weights.h5"});
  // A throw inside write_on_root's fill, on a one-rank job.
  spmd::runtime::Context ctx(MPI_COMM_SELF, {"cpu", 1, 60.0});
  EXPECT_THROW(spmd::data::write_on_root(ctx, path,
                                         [](AtomicH5Writer& w) {
                                           w.write<std::int32_t>("step", std::vector<std::int32_t>{9}, {1});
                                           throw std::runtime_error("failure inside the fill");
                                         }),
               spmd::CollectiveError);
  EXPECT_EQ(file_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"weights.h5"});
  write_step(path, 10);
  EXPECT_EQ(step_in(path), 10);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"weights.h5"});
}

// Two outputs of a run, an HDF5 file and a text, over files that exist: nothing shows under
// the final names until publish(), and an OutputSet destroyed first leaves both as they were.
TEST(DataOutput, OutputSetPublishesAllOrNone) {
  Folder dir("spmd-output");
  const std::string h5 = dir.file("pred.h5"), json = dir.file("run.json"), csv = dir.file("log.csv");
  write_step(h5, 1);
  put(json, "{\"run\": 1}\n");
  put(csv, "a,b\n1,2\n");
  const std::string h5_before = file_bytes(h5);
  spmd::runtime::Context ctx(MPI_COMM_SELF, {"cpu", 1, 60.0});
  {
    OutputSet set(ctx);
    write_step(h5, 2, &set);
    set.write_text(json, "{\"run\": 2}\n");
    set.write_text(csv, "a,b\n3,4\n");
    EXPECT_EQ(file_bytes(h5), h5_before);
    EXPECT_EQ(file_bytes(json), "{\"run\": 1}\n");
    EXPECT_EQ(dir.entries(), (std::vector<std::string>{temp_name_of("log.csv"), temp_name_of("pred.h5"),
                                                       temp_name_of("run.json"), "log.csv", "pred.h5", "run.json"}));
  }  // a failure before publish: the set goes
  EXPECT_EQ(file_bytes(h5), h5_before);
  EXPECT_EQ(file_bytes(json), "{\"run\": 1}\n");
  EXPECT_EQ(file_bytes(csv), "a,b\n1,2\n");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"log.csv", "pred.h5", "run.json"}));

  OutputSet set(ctx);
  write_step(h5, 3, &set);
  set.write_text(json, "{\"run\": 3}\n");
  set.write_text(csv, "a,b\n5,6\n");
  set.publish();
  EXPECT_EQ(step_in(h5), 3);
  EXPECT_EQ(file_bytes(json), "{\"run\": 3}\n");
  EXPECT_EQ(file_bytes(csv), "a,b\n5,6\n");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"log.csv", "pred.h5", "run.json"}));
}

namespace {
// Sets or clears FS_IMMUTABLE_FL on path (root's CAP_LINUX_IMMUTABLE, a file system that has
// it); false where that cannot be done.
bool set_immutable(const std::string& path, bool on) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  int flags = 0;
  bool done = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  if (done) {
    flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
    done = ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  }
  ::close(fd);
  return done;
}
}  // namespace

// A destination that cannot be replaced (chattr +i after the run's start-up checks): found
// before the first rename, so no output is published and every old file stays.
TEST(DataOutput, AnImmutableDestinationPublishesNone) {
  Folder dir("spmd-output");
  const std::string h5 = dir.file("pred.h5"), json = dir.file("run.json");
  put(json, "{\"run\": 1}\n");
  if (!set_immutable(json, true)) GTEST_SKIP() << "cannot set the immutable flag here (needs root and ext4/xfs/btrfs)";
  EXPECT_NE(spmd::data::replace_refusal(json).find("is immutable"), std::string::npos);
  spmd::runtime::Context ctx(MPI_COMM_SELF, {"cpu", 1, 60.0});
  std::string message;
  {
    OutputSet set(ctx);
    write_step(h5, 2, &set);        // staged first: renamed first, were it not checked
    set.write_text(dir.file("log.csv"), "a\n");
    try {
      set.write_text(json, "{\"run\": 2}\n");
      set.publish();
    } catch (const spmd::Error& e) {
      message = e.what();
    }
  }
  set_immutable(json, false);
  EXPECT_NE(message.find("'" + json + "' is immutable"), std::string::npos) << message;
  EXPECT_NE(message.find("no output was published"), std::string::npos) << message;
  EXPECT_EQ(file_bytes(json), "{\"run\": 1}\n");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"run.json"}));  // no pred.h5, no log.csv, no temporaries
  EXPECT_EQ(spmd::data::replace_refusal(json), "");
  EXPECT_EQ(spmd::data::replace_refusal(dir.file("absent.h5")), "");
}

namespace {
// require_safe_outputs' verdict: "" when accepted, else its message.
std::string verdict(const std::vector<FileArgument>& in, const std::vector<FileArgument>& out, int ranks = 1) {
  try {
    spmd::data::require_safe_outputs(in, out, ranks);
    return "";
  } catch (const spmd::Error& e) {
    return e.what();
  }
}
}  // namespace

TEST(DataOutput, AnOutputThatIsAnInputIsRefusedHoweverItIsNamed) {
  Folder dir("spmd-output");
  const std::string data = dir.file("data.h5");
  put(data, "rows");
  fs::create_symlink(data, dir.file("link.h5"));
  fs::create_hard_link(data, dir.file("hard.h5"));
  const std::string cwd = fs::current_path().string();
  fs::current_path(fs::path(data).parent_path());
  const std::string through_dot = verdict({{"data", data}}, {{"predictions", "./data.h5"}});
  fs::current_path(cwd);
  EXPECT_NE(through_dot.find("--predictions './data.h5' is the same file as the input --data"), std::string::npos)
      << through_dot;
  for (const char* name : {"link.h5", "hard.h5"}) {
    const std::string why = verdict({{"data", data}}, {{"predictions", dir.file(name)}});
    EXPECT_NE(why.find("is the same file as the input --data '" + data + "'"), std::string::npos) << name << ": " << why;
  }
  EXPECT_EQ(verdict({{"data", data}}, {{"predictions", dir.file("other.h5")}}), "");
  // An option that is both input and output (--checkpoint with --resume) is not its own clash.
  EXPECT_EQ(verdict({{"checkpoint", data}}, {{"checkpoint", data}}), "");
}

TEST(DataOutput, TwoOutputsThatAreOneFileAreRefused) {
  Folder dir("spmd-output");
  const std::string why = verdict({}, {{"json", dir.file("out.json")}, {"predictions", dir.file("./out.json")}});
  EXPECT_NE(why.find("are the same file"), std::string::npos) << why;
  put(dir.file("a.json"), "{}");
  fs::create_hard_link(dir.file("a.json"), dir.file("b.json"));
  const std::string linked = verdict({}, {{"json", dir.file("a.json")}, {"metrics", dir.file("b.json")}});
  EXPECT_NE(linked.find("--metrics '" + dir.file("b.json") + "' and --json '" + dir.file("a.json") + "' are the same file"),
            std::string::npos)
      << linked;
  EXPECT_EQ(verdict({}, {{"json", dir.file("a.json")}, {"metrics", dir.file("c.json")}}), "");
}

TEST(DataOutput, FifosFoldersAndDevicesAreNotOutputs) {
  Folder dir("spmd-output");
  ASSERT_EQ(::mkfifo(dir.file("pipe").c_str(), 0600), 0);
  EXPECT_NE(verdict({}, {{"json", dir.file("pipe")}}).find("is a FIFO (named pipe), not a regular file"), std::string::npos);
  fs::create_symlink(dir.file("pipe"), dir.file("to-pipe"));
  EXPECT_NE(verdict({}, {{"json", dir.file("to-pipe")}}).find("FIFO"), std::string::npos);
  EXPECT_NE(verdict({}, {{"json", dir.file("")}}).find("is a directory"), std::string::npos);
  EXPECT_NE(verdict({}, {{"json", "/dev/null"}}).find("is a character device"), std::string::npos);
  EXPECT_NE(verdict({}, {{"json", ""}}).find("--json: the file name is empty"), std::string::npos);
}

TEST(DataOutput, NamesLeaveRoomForTheTemporaryAndMpiIo) {
  Folder dir("spmd-output");
  const long name_max = ::pathconf(dir.file("").c_str(), _PC_NAME_MAX);
  ASSERT_GT(name_max, 20);
  // The temporary '.NAME.tmp.PID' adds 1 + 5 + 10 characters.
  const auto room = static_cast<std::size_t>(name_max) - 16;
  EXPECT_EQ(verdict({}, {{"json", dir.file(std::string(room, 'n'))}}), "");
  const std::string long_name = verdict({}, {{"json", dir.file(std::string(room + 1, 'n'))}});
  EXPECT_NE(long_name.find("(NAME_MAX)"), std::string::npos) << long_name;
  EXPECT_NE(long_name.find("use a name of at most " + std::to_string(room) + " characters"), std::string::npos) << long_name;
  // The absolute path within PATH_MAX, the temporary's characters included.
  std::string deep = "/";
  while (deep.size() < PATH_MAX) deep += std::string(200, 'd') + "/";
  EXPECT_NE(verdict({}, {{"json", deep + "x.json"}}).find("(PATH_MAX)"), std::string::npos);
  // Open MPI 4.1's 256-byte buffer for NAME.locktest.RANK, for files every rank opens.
  const std::size_t limit = spmd::data::mpi_io_path_limit(10);
  EXPECT_EQ(limit, 255u - 10u - 1u);
  const std::string input(limit + 1, 'i');
  EXPECT_NE(verdict({{"data", input, true}}, {}, 10).find("too long for MPI-IO"), std::string::npos);
  EXPECT_EQ(verdict({{"data", std::string(limit, 'i'), true}}, {}, 10), "");
  EXPECT_EQ(verdict({{"data", input, false}}, {}, 10), "") << "a file only one rank opens has no MPI-IO limit";
}
