// Reading features stored as users' h5py files store them: uint8 images [N, 28, 28, 1]
// contiguous, in row chunks (1024, 28, 28, 1) plain and gzip'd, and in column chunks
// [N, 784] / (N, 1) gzip'd (the layout `spmd data info` calls slow by nature). Each is read
// whole, through the two paths the workloads take:
//   stream: data::SerialRowReader in reads of 16 MiB of float32 rows (eval's streamed rows),
//   load:   data::ShardReader::read_stored on this one rank (logreg's and the shard loads:
//           MPI-IO, collective, 64 MiB pieces),
// and by h5py in the same reads (tools/bench/h5py_read_reference.py) when /usr/bin/python3
// has it. Every time is the fastest of --runs passes over the same file (warm page cache:
// what is measured is the library's cost per row, not the disk's); ratios are to the
// contiguous file read the same way in the same run.
//
//   bench_h5_read [--rows N=100000] [--runs R=3] [--dir DIR=$TMPDIR or /tmp] [--no-h5py]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <unistd.h>
#include <string>
#include <vector>

#include <hdf5.h>
#include <nlohmann/json.hpp>

#include "python_peer.hpp"

#include "spmd/data/dataset.hpp"
#include "spmd/data/serial_row_reader.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"

namespace {

struct Layout {
  const char* name;
  std::vector<hsize_t> chunk;  // {} contiguous; else the chunk dims (2-D: [N, 784])
  bool gzip;
};

struct Options {
  std::int64_t rows = 100000;
  int runs = 3;
  std::string dir;
  bool h5py = true;
};

// Pixels with the structure of images (a gradient) and some noise, so gzip has work to do.
std::vector<unsigned char> make_pixels(std::int64_t rows) {
  std::vector<unsigned char> x(static_cast<std::size_t>(rows) * 784);
  std::uint32_t state = 12345;
  for (std::size_t i = 0; i < x.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    x[i] = static_cast<unsigned char>((i % 784) / 4 + ((state >> 24) & 0x1f));
  }
  return x;
}

void write_file(const std::string& path, const Layout& layout, const std::vector<unsigned char>& x, std::int64_t rows) {
  const bool flat = layout.chunk.size() == 2;
  std::vector<hsize_t> dims = flat ? std::vector<hsize_t>{static_cast<hsize_t>(rows), 784}
                                   : std::vector<hsize_t>{static_cast<hsize_t>(rows), 28, 28, 1};
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!layout.chunk.empty()) {
    std::vector<hsize_t> chunk = layout.chunk;
    chunk[0] = std::min<hsize_t>(chunk[0], dims[0]);
    H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
    if (layout.gzip) H5Pset_deflate(dcpl, 4);  // h5py's compression='gzip' level
  }
  const hid_t ds = H5Dcreate2(file, "x", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (ds < 0 || H5Dwrite(ds, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.data()) < 0)
    throw spmd::Error("cannot write " + path);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(file);
}

double fastest(int runs, const std::function<void()>& pass) {
  double best = 1e300;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pass();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

nlohmann::json run_h5py(std::int64_t block, int runs, const std::vector<std::string>& files) {
  std::string args = "--block " + std::to_string(block) + " --runs " + std::to_string(runs);
  for (const auto& f : files) args += " " + f;
  nlohmann::json out = spmd::bench::run_python_peer(__FILE__, "h5py_read_reference.py", args);
  if (out.contains("error")) return nlohmann::json::object();  // no h5py: its columns stay empty
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  const char* tmp = std::getenv("TMPDIR");
  o.dir = tmp && *tmp ? tmp : "/tmp";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw spmd::Error("option '" + a + "' needs a value");
      return argv[++i];
    };
    if (a == "--rows") o.rows = std::atoll(value().c_str());
    else if (a == "--runs") o.runs = std::atoi(value().c_str());
    else if (a == "--dir") o.dir = value();
    else if (a == "--no-h5py") o.h5py = false;
    else throw spmd::Error("unknown option '" + a + "' (--rows N, --runs R, --dir DIR, --no-h5py)");
  }
  if (o.rows < 1 || o.runs < 1) throw spmd::Error("--rows and --runs must be >= 1");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    const Options o = parse(argc, argv);
    spmd::runtime::Context ctx(MPI_COMM_SELF, {"cpu", 1, 600.0});
    const std::vector<Layout> layouts = {{"contiguous", {}, false},
                                         {"chunks (1024,28,28,1)", {1024, 28, 28, 1}, false},
                                         {"chunks (1024,28,28,1) gzip", {1024, 28, 28, 1}, true},
                                         {"chunks (N,1) gzip, [N,784]", {static_cast<hsize_t>(o.rows), 1}, true}};
    const auto pixels = make_pixels(o.rows);
    const std::int64_t block = std::max<std::int64_t>(1, (std::int64_t{16} << 20) / (784 * 4));
    std::vector<std::string> files;
    for (std::size_t i = 0; i < layouts.size(); ++i) {
      files.push_back(o.dir + "/bench_h5_read." + std::to_string(::getpid()) + "." + std::to_string(i) + ".h5");
      write_file(files.back(), layouts[i], pixels, o.rows);
    }
    std::printf("# reading %lld uint8 rows of 784 (%.1f MiB), fastest of %d passes; stream: reads of %lld rows\n",
                static_cast<long long>(o.rows), static_cast<double>(pixels.size()) / (1 << 20), o.runs,
                static_cast<long long>(block));
    const nlohmann::json peer = o.h5py ? run_h5py(block, o.runs, files) : nlohmann::json::object();
    if (peer.empty()) std::printf("# h5py: not measured (--no-h5py, or no h5py for /usr/bin/python3)\n");
    std::printf("# %-28s %10s %8s %10s %8s %10s %8s %10s\n", "layout", "stream s", "x contig", "load s", "x contig",
                "h5py s", "x contig", "stream/h5py");
    double base[3] = {0, 0, 0};
    std::vector<std::byte> out(pixels.size());
    for (std::size_t i = 0; i < layouts.size(); ++i) {
      const auto shape = spmd::data::probe_shape(files[i], {"x", ""});
      const double stream = fastest(o.runs, [&] {
        spmd::data::SerialRowReader reader(files[i], "x", shape);
        for (std::int64_t r = 0; r < o.rows; r += block)
          reader.read(r, std::min(block, o.rows - r), out.data() + r * 784);
      });
      if (std::memcmp(out.data(), pixels.data(), pixels.size()) != 0) throw spmd::Error(files[i] + ": stream differs");
      const double load = fastest(o.runs, [&] {
        spmd::data::ShardReader reader(ctx, files[i], {"x", ""});
        reader.read_stored(0, o.rows, out);
      });
      if (std::memcmp(out.data(), pixels.data(), pixels.size()) != 0) throw spmd::Error(files[i] + ": load differs");
      const double h5py = peer.contains(files[i]) ? peer[files[i]].get<double>() : 0.0;
      if (i == 0) base[0] = stream, base[1] = load, base[2] = h5py;
      std::printf("  %-28s %10.4f %8.2f %10.4f %8.2f %10.4f %8.2f %10.2f\n", layouts[i].name, stream, stream / base[0],
                  load, load / base[1], h5py, base[2] > 0 ? h5py / base[2] : 0.0, h5py > 0 ? stream / h5py : 0.0);
    }
    for (const auto& f : files) std::filesystem::remove(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_h5_read: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
