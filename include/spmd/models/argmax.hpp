#pragma once
// The predicted class, everywhere a class is chosen from scores (eval's classifiers, the
// ensemble's test pass): the first index of the highest value, so ties go to the lower class
// and every layout and backend picks the same class from the same bits.
#include <cmath>
#include <cstdint>

namespace spmd::models {

// value(c) for c in [0, classes): the score of class c. classes >= 1. all_finite: whether every
// score was finite. A NaN or an infinity among a row's scores leaves its class to the
// comparisons (a NaN is never higher), so eval reports how many rows had one
// (DevicePredictor::non_finite_rows) rather than pass their class off as a result.
template <class Value>
int argmax_of(int classes, Value value, bool& all_finite) {
  int best = 0;
  auto best_value = value(0);
  bool finite = std::isfinite(best_value);
  for (int c = 1; c < classes; ++c) {
    const auto v = value(c);
    finite = finite && std::isfinite(v);
    if (v > best_value) {
      best = c;
      best_value = v;
    }
  }
  all_finite = finite;
  return best;
}

template <class Value>
int argmax_of(int classes, Value value) {
  bool unused;
  return argmax_of(classes, value, unused);
}

template <class T>
int argmax(const T* scores, int classes, bool& all_finite) {
  return argmax_of(classes, [scores](int c) { return scores[c]; }, all_finite);
}

template <class T>
int argmax(const T* scores, int classes) {
  return argmax_of(classes, [scores](int c) { return scores[c]; });
}

}  // namespace spmd::models
