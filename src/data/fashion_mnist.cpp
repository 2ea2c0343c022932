#include "spmd/data/fashion_mnist.hpp"

#include <zlib.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "spmd/data/h5_writer.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::data {

namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension
constexpr int kSide = 28;
constexpr int kClasses = 10;
// No IDX file of this kind is near this size; a larger count means a damaged header.
constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 32;

const std::array<const char*, kClasses> kClassNames = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                       "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// An open gzip stream (zlib also reads uncompressed files through it).
class GzReader {
 public:
  explicit GzReader(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    if (!fs::is_regular_file(path_, ec))
      throw Error("Fashion-MNIST file '" + path_ +
                  "' not found. The data comes from Debian's package: apt-get install dataset-fashion-mnist "
                  "(or pass the folder that holds the *-ubyte.gz files)");
    file_ = gzopen(path_.c_str(), "rb");
    if (!file_) throw Error("cannot open '" + path_ + "' for reading");
    gzbuffer(file_, 1 << 20);
  }
  ~GzReader() {
    if (file_) gzclose(file_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads exactly `bytes` into out or throws, naming what was being read. out grows as the
  // data arrives: a header that claims far more than the file holds costs an error, not
  // gigabytes of memory (found by fuzzing).
  void read_exact(std::vector<std::uint8_t>& out, std::uint64_t bytes, const std::string& what) {
    constexpr std::uint64_t kPiece = 16u << 20;
    out.clear();
    out.reserve(static_cast<std::size_t>(std::min(bytes, kPiece)));
    while (out.size() < bytes) {
      const std::uint64_t piece = std::min<std::uint64_t>(bytes - out.size(), kPiece);
      const std::size_t old = out.size();
      out.resize(old + static_cast<std::size_t>(piece));
      const int got = gzread(file_, out.data() + old, static_cast<unsigned>(piece));
      if (got < 0) throw corrupt();
      out.resize(old + static_cast<std::size_t>(got));
      if (static_cast<std::uint64_t>(got) < piece)
        throw Error("'" + path_ + "' is truncated: " + what + " needs " + std::to_string(bytes) + " bytes, only " +
                    std::to_string(out.size()) + " are there" + zlib_detail());
    }
  }

  std::uint32_t read_be32(const std::string& what) {
    std::vector<std::uint8_t> b;
    read_exact(b, 4, what);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
  }

  // The payload must be the whole file; reading past it also makes zlib check the gzip
  // trailer (CRC-32 and length), which catches corruption inside the payload.
  void require_end(const std::string& what) {
    unsigned char extra = 0;
    const int got = gzread(file_, &extra, 1);
    if (got < 0) throw corrupt();
    if (got > 0) throw Error("'" + path_ + "' has data after " + what + " (not an IDX file of the expected size)");
    int code = Z_OK;
    gzerror(file_, &code);
    if (code != Z_OK) throw Error("'" + path_ + "' is truncated or damaged after " + what + zlib_detail());
  }

  const std::string& path() const { return path_; }

 private:
  std::string zlib_detail() {
    int code = Z_OK;
    const char* text = gzerror(file_, &code);
    return code != Z_OK && text && *text ? std::string(" (zlib: ") + text + ")" : std::string();
  }
  Error corrupt() { return Error("'" + path_ + "' is not a valid gzip stream or is damaged" + zlib_detail()); }

  std::string path_;
  gzFile file_ = nullptr;
};

void require_magic(GzReader& in, std::uint32_t expected, const char* kind) {
  const std::uint32_t magic = in.read_be32("the IDX header");
  if (magic != expected)
    throw Error("'" + in.path() + "' is not an IDX " + kind + " file: magic number " + std::to_string(magic) +
                ", expected " + std::to_string(expected));
}

}  // namespace

std::string default_fashion_mnist_dir() {
  std::ifstream list("/var/lib/dpkg/info/dataset-fashion-mnist.list");
  const std::string marker = "/train-images-idx3-ubyte.gz";
  for (std::string line; std::getline(list, line);)
    if (line.size() > marker.size() && line.compare(line.size() - marker.size(), marker.size(), marker) == 0)
      return line.substr(0, line.size() - marker.size());
  return kDebianFashionMnistDir;
}

IdxImages read_idx_images(const std::string& path) {
  GzReader in(path);
  require_magic(in, kImagesMagic, "images (idx3-ubyte)");
  IdxImages images;
  images.count = in.read_be32("the image count");
  images.rows = static_cast<int>(in.read_be32("the image height"));
  images.cols = static_cast<int>(in.read_be32("the image width"));
  if (images.rows != kSide || images.cols != kSide)
    throw Error("'" + path + "' holds " + std::to_string(images.rows) + "x" + std::to_string(images.cols) +
                " images; Fashion-MNIST images are 28x28");
  const std::uint64_t bytes = static_cast<std::uint64_t>(images.count) * kSide * kSide;
  if (bytes > kMaxPayloadBytes)
    throw Error("'" + path + "' claims " + std::to_string(images.count) + " images, implausibly many (damaged header?)");
  in.read_exact(images.pixels, bytes, std::to_string(images.count) + " images of 28x28");
  in.require_end(std::to_string(images.count) + " images");
  return images;
}

std::vector<std::uint8_t> read_idx_labels(const std::string& path) {
  GzReader in(path);
  require_magic(in, kLabelsMagic, "labels (idx1-ubyte)");
  const std::uint32_t count = in.read_be32("the label count");
  if (count > kMaxPayloadBytes)
    throw Error("'" + path + "' claims " + std::to_string(count) + " labels, implausibly many (damaged header?)");
  std::vector<std::uint8_t> labels;
  in.read_exact(labels, count, std::to_string(count) + " labels");
  in.require_end(std::to_string(count) + " labels");
  return labels;
}

namespace {

std::int64_t convert_split(const std::string& source_dir, const std::string& prefix, const std::string& out_path) {
  const std::string images_path = (fs::path(source_dir) / (prefix + "-images-idx3-ubyte.gz")).string();
  const std::string labels_path = (fs::path(source_dir) / (prefix + "-labels-idx1-ubyte.gz")).string();
  // Both files are checked for presence before the (slow) decoding of either.
  for (const auto& p : {images_path, labels_path}) GzReader probe(p);
  const IdxImages images = read_idx_images(images_path);
  const std::vector<std::uint8_t> labels = read_idx_labels(labels_path);
  if (static_cast<std::int64_t>(labels.size()) != images.count)
    throw Error("'" + images_path + "' holds " + std::to_string(images.count) + " images but '" + labels_path +
                "' holds " + std::to_string(labels.size()) + " labels; they must match");
  std::vector<std::int32_t> labels32(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= kClasses)
      throw Error("'" + labels_path + "': label " + std::to_string(labels[i]) + " at row " + std::to_string(i) +
                  " is outside [0, 10)");
    labels32[i] = labels[i];
  }
  AtomicH5Writer writer(out_path);
  writer.write<std::uint8_t>("images", images.pixels, {images.count, kSide, kSide, 1});
  writer.write<std::int32_t>("labels", labels32, {images.count});
  writer.set_attribute_string("/", "source_images", images_path);
  writer.set_attribute_string("/", "source_labels", labels_path);
  writer.set_attribute_string("/", "layout", "images: uint8 NHWC 0..255 (loaders scale by 1/255); labels: int32");
  writer.set_attribute_int("/", "classes", kClasses);
  std::string names;
  for (const char* n : kClassNames) {
    if (!names.empty()) names += ',';
    names += n;
  }
  writer.set_attribute_string("/", "class_names", names);
  writer.commit();
  return images.count;
}

}  // namespace

FashionMnistSummary convert_fashion_mnist(const std::string& source_dir, const std::string& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (!fs::is_directory(out_dir))
    throw Error("cannot create the output folder '" + out_dir + "'" + (ec ? ": " + ec.message() : std::string()));
  FashionMnistSummary summary;
  summary.train_path = (fs::path(out_dir) / "train.h5").string();
  summary.test_path = (fs::path(out_dir) / "test.h5").string();
  summary.train_rows = convert_split(source_dir, "train", summary.train_path);
  summary.test_rows = convert_split(source_dir, "t10k", summary.test_path);
  return summary;
}

}  // namespace spmd::data
