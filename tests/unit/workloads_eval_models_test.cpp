// The eval model registry: one row per model, the only place a model's name is compared;
// --model's choices, its refusals and the loaders come from it.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/eval.hpp"
#include "spmd/workloads/eval_models.hpp"

using namespace spmd;

TEST(EvalModels, EveryRowIsCompleteAndNamedOnce) {
  std::set<std::string> names;
  for (const auto& m : workloads::eval_models()) {
    EXPECT_FALSE(m.name.empty());
    EXPECT_FALSE(m.summary.empty()) << m.name;
    EXPECT_TRUE(static_cast<bool>(m.load)) << m.name;
    EXPECT_TRUE(names.insert(m.name).second) << m.name << " registered twice";
    EXPECT_EQ(&workloads::eval_model(m.name), &m);
    EXPECT_NE(workloads::eval_models_help().find(m.name + ": " + m.summary), std::string::npos) << m.name;
  }
  EXPECT_TRUE(names.count("zero") && names.count("logreg") && names.count("cnn"));
}

TEST(EvalModels, AnUnknownNameIsRefusedListingEveryChoice) {
  try {
    workloads::eval_model("resnet");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string expected;
    for (const auto& m : workloads::eval_models()) expected += (expected.empty() ? "" : "|") + m.name;
    EXPECT_EQ(std::string(e.what()), "--model must be one of " + expected + " (got 'resnet')");
  }
}

TEST(EvalModels, AModelWithoutWeightsLoadsFromTheClassesAlone) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 1, 60.0});
  for (const auto& m : workloads::eval_models()) {
    if (!m.weights.empty()) continue;
    workloads::EvalOptions o;
    o.classes = 7;
    const auto classifier = m.load(ctx, o);
    ASSERT_NE(classifier, nullptr) << m.name;
    EXPECT_EQ(classifier->classes(), 7) << m.name;
  }
}
