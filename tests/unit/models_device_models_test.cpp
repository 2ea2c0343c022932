// Device implementations keyed by model kind: a backend provides a factory per kind it runs;
// asking a backend for a kind it lacks is refused naming both (a new kind needs no change to
// the backends that do not accelerate it), and the CPU backend provides every kind.
#include <gtest/gtest.h>

#include <string>

#include "spmd/backends/backend.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/runtime/error.hpp"

using namespace spmd;

namespace {

// A model kind no backend knows (as a new model's would be before any backend provides it).
struct NewKind {
  static constexpr const char* name = "new layer (a test's model kind)";
  using Make = int (*)(const runtime::DeviceInfo&, int);
};

class OneKindBackend final : public models::DeviceModels {
 public:
  OneKindBackend() {
    provide<NewKind>([](const runtime::DeviceInfo&, int x) { return 2 * x; });
  }
};

}  // namespace

TEST(DeviceModels, AProvidedKindIsFoundByItsName) {
  const OneKindBackend backend;
  EXPECT_TRUE(backend.provides(NewKind::name));
  EXPECT_EQ(backend.factory<NewKind>("test")(runtime::DeviceInfo{}, 21), 42);
}

TEST(DeviceModels, AMissingKindIsRefusedNamingTheKindAndTheBackend) {
  const OneKindBackend backend;
  EXPECT_FALSE(backend.provides(models::LogregPredictorKind::name));
  try {
    backend.factory<models::LogregPredictorKind>("test");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the test backend has no logistic-regression predictor"), std::string::npos) << what;
    EXPECT_NE(what.find("it provides: new layer (a test's model kind)"), std::string::npos) << what;
  }
}

TEST(DeviceModels, TheCpuBackendProvidesEveryKind) {
  const runtime::DeviceInfo cpu;  // the host platform
  const auto& models = models::device_models(cpu);
  for (const char* kind : {models::CnnMemberKind::name, models::LogregShardKind::name, models::LogregPredictorKind::name})
    EXPECT_TRUE(models.provides(kind)) << kind;
  EXPECT_FALSE(models.provides(NewKind::name));
}
