// An answer of an analysis session: the value, whether it came from the cache, and the time it
// took (lookup or computation). Plain C++.
#pragma once

namespace mumoe::analysis {

template <typename T>
struct Answer {
  T value;
  bool from_cache = false;
  double seconds = 0;  ///< time to answer (lookup or computation)
};

}  // namespace mumoe::analysis
