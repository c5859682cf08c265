// Fixtures written by real PyTorch at test time: Debian's python3-torch (and torchvision, PIL)
// run as /usr/bin/python3 write models, images and expected outputs into a test's temporary
// directory, so expected values never come from the code under test. MUMOE_TEST_PYTHON names
// another interpreter: a GPU machine's PyTorch 2.x (scripts/gpu-check.sh) is then the reference.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "temp_dir.h"

namespace mumoe::testkit {

/// The interpreter that writes fixtures: $MUMOE_TEST_PYTHON where set, else /usr/bin/python3
/// (quoted in the command lines: no single quote in its path).
inline std::string python_interpreter() {
  const char* chosen = std::getenv("MUMOE_TEST_PYTHON");
  return chosen && *chosen ? chosen : "/usr/bin/python3";
}

/// True when the interpreter can import every module of `modules` ("torch torchvision PIL").
/// Asked once per process and list: `import torch` alone takes about 1.5 s, and a suite's tests
/// run in one process (cmake/TestSuites.cmake).
inline bool python_has(const std::string& modules) {
  static std::map<std::string, bool> answers;
  if (auto known = answers.find(modules); known != answers.end()) return known->second;
  std::string imports;
  for (size_t start = 0; start < modules.size();) {
    auto end = modules.find(' ', start);
    if (end == std::string::npos) end = modules.size();
    if (end > start) imports += "import " + modules.substr(start, end - start) + "; ";
    start = end + 1;
  }
  const bool has = std::system(("'" + python_interpreter() + "' -c '" + imports + "' >/dev/null 2>&1").c_str()) == 0;
  answers.emplace(modules, has);
  return has;
}

/// Runs `script` with the interpreter in `dir` (argv[1] = dir, torch imported, seed 0); fails the
/// test on a non-zero exit.
inline void run_python(const TempDir& dir, const std::string& script) {
  const auto path = dir.file("fixture.py");
  write_bytes(path, "import sys, os, collections, torch\nos.chdir(sys.argv[1])\ntorch.manual_seed(0)\n" + script);
  const auto command = "'" + python_interpreter() + "' " + path + " " + dir.path().string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << "python fixture failed: " << command;
}

}  // namespace mumoe::testkit

/// Skips the test when the interpreter lacks one of `modules` (scripts/setup.sh installs them).
#define REQUIRE_PYTHON(modules)                                                                            \
  if (!::mumoe::testkit::python_has(modules))                                                              \
  GTEST_SKIP() << ::mumoe::testkit::python_interpreter() << " lacks one of: " << (modules)                               \
               << " (scripts/setup.sh installs python3-torch, python3-torchvision, python3-pil)"
