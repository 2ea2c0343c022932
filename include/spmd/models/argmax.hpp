#pragma once
// The predicted class, everywhere a class is chosen from scores (eval's classifiers, the
// ensemble's test pass): the first index of the highest value, so ties go to the lower class
// and every layout and backend picks the same class from the same bits.
#include <cstdint>

namespace spmd::models {

// value(c) for c in [0, classes): the score of class c. classes >= 1.
template <class Value>
int argmax_of(int classes, Value value) {
  int best = 0;
  auto best_value = value(0);
  for (int c = 1; c < classes; ++c) {
    const auto v = value(c);
    if (v > best_value) {
      best = c;
      best_value = v;
    }
  }
  return best;
}

template <class T>
int argmax(const T* scores, int classes) {
  return argmax_of(classes, [scores](int c) { return scores[c]; });
}

}  // namespace spmd::models
