// Runs the `mumoe` executable (MUMOE_CLI_PATH, set by the build) and captures its output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace mumoe::testkit {

struct CliRun {
  int code = -1;    ///< exit status, or 128 + signal if it was killed (a crash)
  std::string out;  ///< stdout and stderr together
  bool killed = false;
};

/// Runs a shell command line (e.g. under `ulimit` or `timeout`), stdout and stderr together.
inline CliRun run_shell(const std::string& command) {
  CliRun run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) run.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  run.killed = !WIFEXITED(status);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

inline CliRun run_cli(const std::string& args) { return run_shell(std::string(MUMOE_CLI_PATH) + " " + args); }

/// The run's output as JSON, after checking that it succeeded (a failed run's output is shown).
inline nlohmann::json json_output(const CliRun& run) {
  EXPECT_EQ(run.code, 0) << run.out;
  return nlohmann::json::parse(run.out);
}

}  // namespace mumoe::testkit
