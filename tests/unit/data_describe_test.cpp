// describe_file (`spmd data info`): datasets, dtypes, shapes, attributes and label
// histograms of a generated file, as a struct, JSON and text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "spmd/data/describe.hpp"
#include "spmd/data/h5_writer.hpp"
#include "spmd/data/make_classification.hpp"
#include "spmd/runtime/error.hpp"

namespace {

namespace fs = std::filesystem;
using spmd::data::describe_file;

class DataDescribe : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spmd-describe-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

const spmd::data::DatasetDescription& find(const spmd::data::FileDescription& f, const std::string& name) {
  for (const auto& d : f.datasets)
    if (d.name == name) return d;
  throw std::runtime_error("no dataset " + name);
}

TEST_F(DataDescribe, GeneratedClassificationFile) {
  spmd::data::ClassificationParams p;
  p.n_samples = 1003;
  p.n_features = 9;
  p.n_informative = 3;
  p.n_classes = 4;
  p.random_state = 8;
  const std::string path = file("cls.h5");
  const auto data = spmd::data::make_classification_file(path, p);
  const auto info = describe_file(path);
  EXPECT_EQ(info.path, path);
  EXPECT_EQ(info.file_bytes, static_cast<std::int64_t>(fs::file_size(path)));
  ASSERT_EQ(info.datasets.size(), 2u);
  const auto& X = find(info, "/X");
  EXPECT_EQ(X.shape, (std::vector<std::int64_t>{1003, 9}));
  EXPECT_EQ(X.dtype, "float32");
  EXPECT_EQ(X.bytes, 1003 * 9 * 4);
  EXPECT_FALSE(X.histogram.has_value());
  const auto& y = find(info, "/y");
  EXPECT_EQ(y.dtype, "int32");
  ASSERT_TRUE(y.histogram.has_value());
  std::map<std::int64_t, std::int64_t> expected;
  for (auto label : data.y) ++expected[label];
  EXPECT_EQ(y.histogram->counts, (std::vector<std::pair<std::int64_t, std::int64_t>>(expected.begin(), expected.end())));
  EXPECT_EQ(y.histogram->distinct, static_cast<std::int64_t>(expected.size()));
  EXPECT_EQ(y.histogram->min, expected.begin()->first);
  EXPECT_EQ(y.histogram->max, expected.rbegin()->first);
  bool saw_informative = false;
  for (const auto& a : info.attributes)
    if (a.name == "n_informative") {
      saw_informative = true;
      EXPECT_EQ(a.value, "3");
      EXPECT_EQ(a.json, 3);
    }
  EXPECT_TRUE(saw_informative);

  const auto j = spmd::data::to_json(info);
  EXPECT_EQ(j["datasets"].size(), 2u);
  EXPECT_EQ(j["attributes"]["n_classes"], 4);
  EXPECT_EQ(j["attributes"]["weights"], "None");
  std::int64_t total = 0;
  for (const auto& dj : j["datasets"])
    if (dj["name"] == "/y")
      for (const auto& [value, count] : dj["histogram"]["counts"].items()) total += count.get<std::int64_t>();
  EXPECT_EQ(total, 1003);
  const std::string text = spmd::data::to_text(info);
  for (const char* needle : {"/X", "/y", "float32", "[1003, 9]", "histogram of /y", "n_informative = 3"})
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
}

TEST_F(DataDescribe, NestedGroupsOtherTypesAndManyDistinctValues) {
  const std::string path = file("misc.h5");
  {
    spmd::data::AtomicH5Writer w(path);
    w.write<std::uint64_t>("train/labels", std::vector<std::uint64_t>{3, 3, 1, 0}, {4});
    w.write<double>("train/weights", std::vector<double>{0.5, 1.5}, {2});
    std::vector<std::int64_t> ids(3000);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i) - 5;
    w.write<std::int64_t>("ids", ids, {3000});
    w.write<std::int8_t>("grid", std::vector<std::int8_t>(6, -1), {2, 3});
    w.set_attribute_doubles("train/weights", "range", std::vector<double>{0.0, 2.0});
    w.commit();
  }
  const auto info = describe_file(path);
  ASSERT_EQ(info.datasets.size(), 4u);
  EXPECT_EQ(info.datasets[0].name, "/grid");
  EXPECT_FALSE(find(info, "/grid").histogram.has_value()) << "2-D: not a label column";
  EXPECT_FALSE(find(info, "/train/weights").histogram.has_value());
  EXPECT_EQ(find(info, "/train/weights").attributes.at(0).value, "[0, 2]");
  const auto& labels = find(info, "/train/labels");
  EXPECT_EQ(labels.dtype, "uint64");
  ASSERT_TRUE(labels.histogram.has_value());
  EXPECT_EQ(labels.histogram->counts, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 1}, {1, 1}, {3, 2}}));
  const auto& ids = find(info, "/ids");
  ASSERT_TRUE(ids.histogram.has_value());
  EXPECT_EQ(ids.histogram->distinct, 3000);
  EXPECT_EQ(ids.histogram->min, -5);
  EXPECT_EQ(ids.histogram->max, 2994);
  EXPECT_TRUE(ids.histogram->counts.empty()) << "too many values to list";
  EXPECT_THROW(describe_file(file("absent.h5")), spmd::Error);
}

TEST_F(DataDescribe, LabelHistogramOverSeveralReadPieces) {
  // The labels are read in pieces of 2^20 values: three pieces here, the last one short and
  // holding the only negative value and the largest.
  const std::int64_t n = (std::int64_t{1} << 21) + 3;
  std::vector<std::int8_t> y(static_cast<std::size_t>(n));
  std::map<std::int64_t, std::int64_t> expected;
  for (std::int64_t i = 0; i < n; ++i) {
    y[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(i == n - 1 ? -7 : i == n - 2 ? 9 : i % 5);
    ++expected[y[static_cast<std::size_t>(i)]];
  }
  const std::string path = file("pieces.h5");
  {
    spmd::data::AtomicH5Writer w(path);
    w.write<std::int8_t>("y", y, {n});
    w.commit();
  }
  const auto info = describe_file(path);
  const auto& h = find(info, "/y").histogram;
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->counts, (std::vector<std::pair<std::int64_t, std::int64_t>>(expected.begin(), expected.end())));
  EXPECT_EQ(h->min, -7);
  EXPECT_EQ(h->max, 9);
  EXPECT_EQ(h->distinct, 7);
}

}  // namespace
