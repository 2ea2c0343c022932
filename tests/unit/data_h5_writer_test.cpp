// AtomicH5Writer and H5Reader: a file appears complete or not at all, and what was
// written reads back exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "spmd/data/h5_reader.hpp"
#include "spmd/data/h5_writer.hpp"
#include "spmd/runtime/error.hpp"
#include "test_folder.hpp"

namespace {

namespace fs = std::filesystem;
using spmd::data::AtomicH5Writer;
using spmd::data::AttributeValue;
using spmd::data::ElementType;
using spmd::data::H5Reader;

// A folder of its own for each test.
struct TempDir : spmd::test::TestFolder {
  TempDir() : TestFolder("spmd-h5-writer") {}
};

template <class T>
std::vector<T> ramp(std::size_t n, T start, T step) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + static_cast<T>(i) * step);
  return v;
}

TEST(DataH5Writer, FinalNameAppearsOnlyAtCommitAndTempLivesBesideIt) {
  TempDir dir;
  const std::string final_path = dir.file("weights.h5");
  AtomicH5Writer writer(final_path);
  EXPECT_EQ(fs::path(writer.temp_path()).parent_path(), fs::path(final_path).parent_path());
  EXPECT_EQ(fs::path(writer.temp_path()).filename().string(), ".weights.h5.tmp." + std::to_string(::getpid()));
  writer.write<float>("w", ramp<float>(12, 0.5f, 1.0f), {3, 4});
  EXPECT_FALSE(fs::exists(final_path)) << "visible before commit";
  EXPECT_TRUE(fs::exists(writer.temp_path()));
  writer.commit();
  EXPECT_TRUE(fs::exists(final_path));
  EXPECT_FALSE(fs::exists(writer.temp_path()));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"weights.h5"});
  EXPECT_THROW(writer.write<float>("late", ramp<float>(1, 0.f, 1.f), {1}), spmd::Error);
}

TEST(DataH5Writer, ExceptionMidWriteLeavesNeitherFinalNorTempFile) {
  TempDir dir;
  const std::string final_path = dir.file("out.h5");
  try {
    AtomicH5Writer writer(final_path);
    writer.write<double>("a", ramp<double>(100, 0.0, 0.25), {10, 10});
    throw std::runtime_error("simulated failure between datasets");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(dir.entries().empty()) << "left: " << (dir.entries().empty() ? "" : dir.entries()[0]);
  // A failing write (shape mismatch) inside the writer behaves the same.
  EXPECT_THROW(
      {
        AtomicH5Writer writer(final_path);
        writer.write<float>("x", ramp<float>(5, 0.f, 1.f), {2, 3});
      },
      spmd::Error);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(DataH5Writer, FailedRewriteKeepsTheOldFile) {
  TempDir dir;
  const std::string final_path = dir.file("checkpoint.h5");
  {
    AtomicH5Writer writer(final_path);
    writer.write<std::int32_t>("step", std::vector<std::int32_t>{7}, {1});
    writer.commit();
  }
  try {
    AtomicH5Writer writer(final_path);
    writer.write<std::int32_t>("step", std::vector<std::int32_t>{8}, {1});
    throw std::runtime_error("crash before commit");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"checkpoint.h5"});
  EXPECT_EQ(H5Reader(final_path).read<std::int32_t>("step"), std::vector<std::int32_t>{7});
  // And a successful rewrite replaces it.
  {
    AtomicH5Writer writer(final_path);
    writer.write<std::int32_t>("step", std::vector<std::int32_t>{9}, {1});
    writer.commit();
  }
  EXPECT_EQ(H5Reader(final_path).read<std::int32_t>("step"), std::vector<std::int32_t>{9});
}

TEST(DataH5Writer, EveryTypeShapeAndAttributeReadsBack) {
  TempDir dir;
  const std::string path = dir.file("all.h5");
  const auto f32 = ramp<float>(24, -3.25f, 0.5f);
  const auto f64 = ramp<double>(6, 1e-3, 1e100);
  const auto i32 = ramp<std::int32_t>(5, std::numeric_limits<std::int32_t>::min(), 1000);
  const auto u8 = ramp<std::uint8_t>(256, 0, 1);
  const auto i64 = ramp<std::int64_t>(3, std::numeric_limits<std::int64_t>::max() - 10, 3);
  const auto i8 = ramp<std::int8_t>(4, -128, 50);
  {
    AtomicH5Writer writer(path);
    writer.write<float>("model/layer0/w", f32, {2, 3, 4});
    writer.write<double>("f64", f64, {6});
    writer.write<std::int32_t>("i32", i32, {5, 1});
    writer.write<std::uint8_t>("u8", u8, {16, 16});
    writer.write<std::int64_t>("i64", i64, {3});
    writer.write<std::int8_t>("i8", i8, {4});
    writer.write<double>("scalar", std::vector<double>{2.5}, {});
    writer.write<float>("empty", std::vector<float>{}, {0, 7});
    writer.set_attribute_string("/", "note", "résumé, with UTF-8");
    writer.set_attribute_string("/", "empty_text", "");
    writer.set_attribute_int("/", "step", -12);
    writer.set_attribute_double("/", "lr", 0.1);
    const std::vector<std::int64_t> ints{1, -2, 3};
    const std::vector<double> doubles{0.5, 0.25};
    writer.set_attribute_ints("model/layer0/w", "fan", ints);
    writer.set_attribute_doubles("/", "weights", doubles);
    writer.set_attribute_int("/", "step", 13);  // the last value wins
    writer.commit();
  }
  H5Reader r(path);
  EXPECT_EQ(r.datasets(), (std::vector<std::string>{"/empty", "/f64", "/i32", "/i64", "/i8", "/model/layer0/w",
                                                    "/scalar", "/u8"}));
  EXPECT_EQ(r.shape("model/layer0/w"), (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_EQ(r.shape("scalar"), std::vector<std::int64_t>{});
  EXPECT_EQ(r.shape("empty"), (std::vector<std::int64_t>{0, 7}));
  EXPECT_EQ(r.element_type("u8"), ElementType::UInt8);
  EXPECT_EQ(r.element_type("i8"), ElementType::Int8);
  EXPECT_EQ(r.read<float>("model/layer0/w", {2, 3, 4}), f32);
  EXPECT_EQ(r.read<double>("f64"), f64);
  EXPECT_EQ(r.read<std::int32_t>("i32"), i32);
  EXPECT_EQ(r.read<std::uint8_t>("u8"), u8);
  EXPECT_EQ(r.read<std::int64_t>("i64"), i64);
  EXPECT_EQ(r.read<std::int8_t>("i8"), i8);
  EXPECT_EQ(r.read<double>("scalar"), std::vector<double>{2.5});
  EXPECT_TRUE(r.read<float>("empty").empty());
  // Converting reads: widening is exact.
  EXPECT_EQ(r.read<double>("model/layer0/w"), std::vector<double>(f32.begin(), f32.end()));
  EXPECT_EQ(r.read<std::int64_t>("u8"), std::vector<std::int64_t>(u8.begin(), u8.end()));

  EXPECT_EQ(r.attribute_string("/", "note"), "résumé, with UTF-8");
  EXPECT_EQ(r.attribute_string("", "empty_text"), "");
  EXPECT_EQ(r.attribute_int("/", "step"), 13);
  EXPECT_DOUBLE_EQ(r.attribute_double("/", "lr"), 0.1);
  EXPECT_DOUBLE_EQ(r.attribute_double("/", "step"), 13.0);
  const AttributeValue fan = r.attribute("model/layer0/w", "fan");
  EXPECT_EQ(fan.kind, AttributeValue::Kind::Integers);
  EXPECT_EQ(fan.integers, (std::vector<std::int64_t>{1, -2, 3}));
  EXPECT_EQ(fan.shape, std::vector<std::int64_t>{3});
  EXPECT_EQ(r.attribute("/", "weights").floats, (std::vector<double>{0.5, 0.25}));
  const auto names = r.attribute_names("/");
  EXPECT_EQ(names, (std::vector<std::string>{"empty_text", "lr", "note", "step", "weights"}));
  EXPECT_TRUE(r.has_attribute("/", "lr"));
  EXPECT_FALSE(r.has_attribute("/", "missing"));
  EXPECT_FALSE(r.has_attribute("no/such/object", "lr"));
}

TEST(DataH5Reader, LossyConversionsAndMistakesAreErrorsThatNameFileAndDataset) {
  TempDir dir;
  const std::string path = dir.file("values.h5");
  {
    AtomicH5Writer writer(path);
    writer.write<std::int64_t>("big", std::vector<std::int64_t>{1, 300}, {2});
    writer.write<double>("fraction", std::vector<double>{1.5}, {1});
    writer.write<double>("huge", std::vector<double>{1e300}, {1});
    writer.write<std::int32_t>("negative", std::vector<std::int32_t>{-1}, {1});
    writer.set_attribute_string("/", "text", "abc");
    writer.commit();
  }
  H5Reader r(path);
  auto message_of = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const spmd::Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  for (const auto& [msg, dataset] : {std::pair{message_of([&] { r.read<std::uint8_t>("big"); }), "big"},
                                     std::pair{message_of([&] { r.read<std::int32_t>("fraction"); }), "fraction"},
                                     std::pair{message_of([&] { r.read<float>("huge"); }), "huge"},
                                     std::pair{message_of([&] { r.read<std::uint32_t>("negative"); }), "negative"},
                                     std::pair{message_of([&] { r.read<float>("absent"); }), "absent"},
                                     std::pair{message_of([&] { r.read<std::int64_t>("big", {3}); }), "big"}}) {
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(dataset), std::string::npos) << msg;
  }
  EXPECT_NE(message_of([&] { r.read<float>("absent"); }).find("/big"), std::string::npos) << "lists what exists";
  EXPECT_EQ(r.read<std::int32_t>("big"), (std::vector<std::int32_t>{1, 300}));
  EXPECT_THROW(r.attribute_int("/", "text"), spmd::Error);
  EXPECT_THROW(r.attribute_string("/", "nothing"), spmd::Error);
  EXPECT_THROW(H5Reader(dir.file("missing.h5")), spmd::Error);
  {
    std::ofstream(dir.file("text.h5")) << "not hdf5\n";
  }
  try {
    H5Reader reader(dir.file("text.h5"));
    FAIL() << "opened a text file";
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an HDF5 file"), std::string::npos) << e.what();
  }
}

TEST(DataH5Writer, RefusesBadTargets) {
  TempDir dir;
  EXPECT_THROW(AtomicH5Writer(dir.file("no/such/folder/x.h5")), spmd::Error);
  EXPECT_THROW(AtomicH5Writer(dir.file("")), spmd::Error);  // a directory
  AtomicH5Writer writer(dir.file("x.h5"));
  EXPECT_THROW(writer.write<float>("neg", std::vector<float>{}, {-1}), spmd::Error);
  EXPECT_THROW(writer.set_attribute_int("no_such_dataset", "a", 1), spmd::Error);
}

}  // namespace
