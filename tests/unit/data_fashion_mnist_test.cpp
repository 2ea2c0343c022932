// Fashion-MNIST import from Debian's dataset-fashion-mnist (installed on the build
// machines), and the converter's checks on synthetic and damaged IDX files.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <fstream>

#include "spmd/data/dataset.hpp"
#include "spmd/data/fashion_mnist.hpp"
#include "spmd/data/h5_reader.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"

namespace {

namespace fs = std::filesystem;
using spmd::data::convert_fashion_mnist;
using spmd::data::H5Reader;

fs::path fresh_dir(const std::string& tag) {
  static int counter = 0;
  const fs::path dir = fs::temp_directory_path() /
                       ("spmd-fmnist-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<unsigned char> be32(std::uint32_t v) {
  return {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 8),
          static_cast<unsigned char>(v)};
}

void write_gz(const fs::path& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  if (!bytes.empty()) ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

std::vector<unsigned char> idx_images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols,
                                      const std::vector<unsigned char>& pixels, std::uint32_t magic = 2051) {
  std::vector<unsigned char> out;
  for (auto v : {magic, count, rows, cols}) {
    auto b = be32(v);
    out.insert(out.end(), b.begin(), b.end());
  }
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

std::vector<unsigned char> idx_labels(std::uint32_t count, const std::vector<unsigned char>& labels,
                                      std::uint32_t magic = 2049) {
  std::vector<unsigned char> out;
  for (auto v : {magic, count}) {
    auto b = be32(v);
    out.insert(out.end(), b.begin(), b.end());
  }
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

// A small valid pair for both splits; pixels and labels follow a formula.
void write_synthetic(const fs::path& dir, std::uint32_t train_n, std::uint32_t test_n) {
  for (const auto& [prefix, n] : {std::pair{"train", train_n}, std::pair{"t10k", test_n}}) {
    std::vector<unsigned char> pixels(static_cast<std::size_t>(n) * 784), labels(n);
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<unsigned char>((i * 37 + n) % 256);
    for (std::uint32_t i = 0; i < n; ++i) labels[i] = static_cast<unsigned char>((i * 3 + n) % 10);
    write_gz(dir / (std::string(prefix) + "-images-idx3-ubyte.gz"), idx_images(n, 28, 28, pixels));
    write_gz(dir / (std::string(prefix) + "-labels-idx1-ubyte.gz"), idx_labels(n, labels));
  }
}

std::string conversion_error(const fs::path& source, const fs::path& out) {
  try {
    convert_fashion_mnist(source.string(), out.string());
  } catch (const spmd::Error& e) {
    return e.what();
  }
  return "(no error)";
}

class DataFashionMnistDebian : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    out_ = new fs::path(fresh_dir("debian"));
    summary_ = new spmd::data::FashionMnistSummary(
        convert_fashion_mnist(spmd::data::default_fashion_mnist_dir(), out_->string()));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*out_);
    delete out_;
    delete summary_;
  }
  static fs::path* out_;
  static spmd::data::FashionMnistSummary* summary_;
};
fs::path* DataFashionMnistDebian::out_ = nullptr;
spmd::data::FashionMnistSummary* DataFashionMnistDebian::summary_ = nullptr;

TEST_F(DataFashionMnistDebian, DefaultDirComesFromThePackage) {
  EXPECT_EQ(spmd::data::default_fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
}

TEST_F(DataFashionMnistDebian, SizesShapesAndBalancedClasses) {
  EXPECT_EQ(summary_->train_rows, 60000);
  EXPECT_EQ(summary_->test_rows, 10000);
  for (const auto& [path, n] : {std::pair{summary_->train_path, 60000}, std::pair{summary_->test_path, 10000}}) {
    H5Reader r(path);
    EXPECT_EQ(r.datasets(), (std::vector<std::string>{"/images", "/labels"}));
    EXPECT_EQ(r.shape("images"), (std::vector<std::int64_t>{n, 28, 28, 1}));
    EXPECT_EQ(r.element_type("images"), spmd::data::ElementType::UInt8);
    EXPECT_EQ(r.element_type("labels"), spmd::data::ElementType::Int32);
    EXPECT_EQ(r.attribute_int("/", "classes"), 10);
    const auto labels = r.read<std::int32_t>("labels", {n});
    for (int c = 0; c < 10; ++c) EXPECT_EQ(std::count(labels.begin(), labels.end(), c), n / 10) << path << " class " << c;
    const auto pixels = r.read<std::uint8_t>("images");
    EXPECT_EQ(*std::max_element(pixels.begin(), pixels.end()), 255);
    EXPECT_EQ(*std::min_element(pixels.begin(), pixels.end()), 0);
    const double mean = std::accumulate(pixels.begin(), pixels.end(), 0.0) / static_cast<double>(pixels.size());
    EXPECT_GT(mean, 60.0);  // Fashion-MNIST's mean pixel is about 73
    EXPECT_LT(mean, 85.0);
  }
}

TEST_F(DataFashionMnistDebian, LoaderScalesPixelsToUnitRange) {
  spmd::runtime::Context ctx(MPI_COMM_SELF, {"cpu", 1, 60.0});
  const auto shard = spmd::data::load_shard(ctx, summary_->test_path, {"images", "labels"}, 9990, 10, 0);
  EXPECT_EQ(shard.classes, 10);
  EXPECT_EQ(shard.sample_shape, (std::vector<std::int64_t>{28, 28, 1}));
  const auto raw = H5Reader(summary_->test_path).read<std::uint8_t>("images");
  for (std::size_t i = 0; i < shard.features.size(); ++i)
    ASSERT_EQ(shard.features[i], static_cast<float>(raw[9990 * 784 + i] / 255.0)) << i;
}

TEST(DataFashionMnist, SyntheticFilesRoundTripExactly) {
  const fs::path src = fresh_dir("src"), out = fresh_dir("out");
  write_synthetic(src, 25, 7);
  const auto summary = convert_fashion_mnist(src.string(), (out / "nested" / "dir").string());
  EXPECT_EQ(summary.train_rows, 25);
  EXPECT_EQ(summary.test_rows, 7);
  const auto images = spmd::data::read_idx_images((src / "t10k-images-idx3-ubyte.gz").string());
  const auto labels = spmd::data::read_idx_labels((src / "t10k-labels-idx1-ubyte.gz").string());
  H5Reader r(summary.test_path);
  EXPECT_EQ(r.read<std::uint8_t>("images", {7, 28, 28, 1}), images.pixels);
  const auto stored = r.read<std::int32_t>("labels", {7});
  EXPECT_EQ(stored, std::vector<std::int32_t>(labels.begin(), labels.end()));
  for (std::uint32_t i = 0; i < 7; ++i) EXPECT_EQ(stored[i], static_cast<std::int32_t>((i * 3 + 7) % 10));
  fs::remove_all(src);
  fs::remove_all(out);
}

TEST(DataFashionMnist, DamagedOrMissingInputsGiveClearErrors) {
  const fs::path out = fresh_dir("out");
  {
    const fs::path empty = fresh_dir("empty");
    const std::string msg = conversion_error(empty, out);
    EXPECT_NE(msg.find("apt-get install dataset-fashion-mnist"), std::string::npos) << msg;
    EXPECT_NE(msg.find("train-images-idx3-ubyte.gz"), std::string::npos) << msg;
    fs::remove_all(empty);
  }
  {  // The real test images, truncated to half of the compressed bytes.
    const fs::path src = fresh_dir("truncated");
    write_synthetic(src, 3, 3);
    const fs::path real = fs::path(spmd::data::kDebianFashionMnistDir) / "t10k-images-idx3-ubyte.gz";
    std::ifstream in(real, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(src / "t10k-images-idx3-ubyte.gz", std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
    const std::string msg = conversion_error(src, out);
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_NE(msg.find("t10k-images-idx3-ubyte.gz"), std::string::npos) << msg;
    fs::remove_all(src);
  }
  {  // Bytes flipped inside the compressed stream: zlib's checks (or the CRC) catch it.
    const fs::path src = fresh_dir("corrupt");
    write_synthetic(src, 40, 3);
    const fs::path victim = src / "train-images-idx3-ubyte.gz";
    std::vector<char> bytes;
    {
      std::ifstream in(victim, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    for (std::size_t i = bytes.size() / 3; i < bytes.size() / 3 + 16; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
    std::ofstream(victim, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const std::string msg = conversion_error(src, out);
    EXPECT_NE(msg.find("train-images-idx3-ubyte.gz"), std::string::npos) << msg;
    EXPECT_TRUE(msg.find("damaged") != std::string::npos || msg.find("truncated") != std::string::npos ||
                msg.find("magic") != std::string::npos)
        << msg;
    fs::remove_all(src);
  }
  {  // Wrong magic numbers: labels where images belong, and vice versa.
    const fs::path src = fresh_dir("magic");
    write_synthetic(src, 3, 3);
    write_gz(src / "train-images-idx3-ubyte.gz", idx_labels(3, {1, 2, 3}));
    std::string msg = conversion_error(src, out);
    EXPECT_NE(msg.find("magic number 2049, expected 2051"), std::string::npos) << msg;
    write_synthetic(src, 3, 3);
    write_gz(src / "t10k-labels-idx1-ubyte.gz", idx_images(3, 28, 28, std::vector<unsigned char>(3 * 784)));
    msg = conversion_error(src, out);
    EXPECT_NE(msg.find("magic number 2051, expected 2049"), std::string::npos) << msg;
    fs::remove_all(src);
  }
  {  // Wrong image size, count mismatch, trailing bytes, a label of 10.
    const fs::path src = fresh_dir("shape");
    write_synthetic(src, 3, 3);
    write_gz(src / "train-images-idx3-ubyte.gz", idx_images(3, 27, 28, std::vector<unsigned char>(3 * 27 * 28)));
    EXPECT_NE(conversion_error(src, out).find("28x28"), std::string::npos);
    write_synthetic(src, 3, 3);
    write_gz(src / "t10k-labels-idx1-ubyte.gz", idx_labels(2, {1, 2}));
    std::string msg = conversion_error(src, out);
    EXPECT_NE(msg.find("3 images"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2 labels"), std::string::npos) << msg;
    write_synthetic(src, 3, 3);
    write_gz(src / "t10k-labels-idx1-ubyte.gz", idx_labels(2, {1, 2, 3}));
    msg = conversion_error(src, out);
    EXPECT_NE(msg.find("data after"), std::string::npos) << msg;
    write_synthetic(src, 3, 3);
    write_gz(src / "train-labels-idx1-ubyte.gz", idx_labels(3, {1, 10, 3}));
    msg = conversion_error(src, out);
    EXPECT_NE(msg.find("label 10"), std::string::npos) << msg;
    fs::remove_all(src);
  }
  // Failed conversions leave no partial output behind.
  for (const auto& e : fs::recursive_directory_iterator(out))
    EXPECT_FALSE(e.is_regular_file() && e.path().filename().string().find(".tmp.") != std::string::npos) << e.path();
  fs::remove_all(out);
}

}  // namespace
