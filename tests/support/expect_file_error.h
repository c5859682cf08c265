// Asserts that a call throws mumoe::FileError whose message contains both a part of the path
// and a phrase describing the problem.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "io/errors.h"

namespace mumoe::testkit {

inline void expect_file_error(const std::function<void()>& call, const std::string& path_part,
                              const std::string& phrase) {
  try {
    call();
    FAIL() << "expected an error containing '" << phrase << "'";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(path_part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

}  // namespace mumoe::testkit
