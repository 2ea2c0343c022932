// The options' declarations: what a checkpoint's defining text is derived from, and the
// defaults a default-constructed struct gives --help.
#include <gtest/gtest.h>

#include <string>

#include "spmd/workloads/ensemble_options.hpp"
#include "spmd/workloads/eval.hpp"
#include "spmd/workloads/logreg.hpp"

namespace spmd::workloads {
namespace {

template <class O>
std::string text_of(const std::string& name, const O& o) {
  for (const auto& option : O::declared())
    if (option.name == name) return option_text(option, o);
  return "(not declared)";
}

// The lines written by the hand-kept list that checkpoints made before the declarations hold:
// every one of them is still derived, so those checkpoints resume.
TEST(WorkloadOptions, EnsembleDefiningLinesAreTheCheckpointsLines) {
  EnsembleOptions o;
  o.train = "/nonexistent/train.h5";
  o.seed = 7;
  o.sgd.learning_rate = 0.05f;
  const std::string text = ensemble_defining_options(o, 4);
  for (const char* line : {"members=4\n", "seed=7\n", "batch-size=32\n", "learning-rate=0.0500000007\n",
                           "momentum=0.899999976\n", "train-limit=0\n", "train=/nonexistent/train.h5"})
    EXPECT_NE(text.find(line), std::string::npos) << line << " missing from\n" << text;
  EXPECT_NE(text.find("input-scale=auto\n"), std::string::npos) << "the scale changes what the members learn";
  EXPECT_NE(ensemble_defining_defaults().find("input-scale=auto\n"), std::string::npos)
      << "a checkpoint without the line was trained with the default";
  EXPECT_EQ(text.find("epochs="), std::string::npos) << "a resumed run may train more epochs";
  EXPECT_EQ(text.find("test"), std::string::npos) << "the test set does not change the members";
}

TEST(WorkloadOptions, TextFieldsPrintTheirDefaults) {
  EXPECT_EQ(text_of("strategy", EvalOptions{}), "pad");
  EXPECT_EQ(text_of("input-scale", EvalOptions{}), "auto");
  EXPECT_EQ(text_of("linesearch", LogregOptions{}), "zoom");
  EXPECT_EQ(text_of("tol", LogregOptions{}), "0.001");
  EXPECT_EQ(text_of("conv-features", EnsembleOptions{}), "32,64");
  EnsembleOptions none;
  none.model.dense_features.clear();
  EXPECT_EQ(text_of("dense-features", none), "none");
}

}  // namespace
}  // namespace spmd::workloads
