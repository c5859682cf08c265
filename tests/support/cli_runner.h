// Runs `mumoe` command lines and captures their output (stdout and stderr together) and exit code.
//
// Test executables built with MUMOE_CLI_IN_PROCESS (they link mumoe_cli) run a command line that
// needs no shell inside their own process, through the same run_mumoe() the program's main()
// calls (app/cli/cli_main.h): the program pays ≈ 0.65 s of LibTorch start-up before main, and the
// CLI tests run it hundreds of times. Everything else — environment prefixes, redirections,
// pipes, `ulimit`, `timeout`, signals, `slurm` (its jobs run this program's own file) — runs the
// executable (MUMOE_CLI_PATH) in a shell, as does every command when MUMOE_TEST_CLI_PROCESS=1.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#ifdef MUMOE_CLI_IN_PROCESS
#include "cli_main.h"
#endif

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

/// The words of `line` as the shell would split them, for lines that use nothing of the shell but
/// words, '…' and "…" quoting and backslash escapes; nullopt for anything else (a redirection,
/// pipe, variable, glob, command substitution, comment or environment assignment).
inline std::optional<std::vector<std::string>> simple_shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word), word.clear(), in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const auto end = line.find('\'', i + 1);
      if (end == std::string::npos) return std::nullopt;
      word += line.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '$' || line[i] == '`') return std::nullopt;
        if (line[i] == '\\' && i + 1 < line.size() && std::string("$`\"\\").find(line[i + 1]) != std::string::npos) ++i;
        word += line[i];
      }
      if (i >= line.size()) return std::nullopt;
    } else if (c == '\\') {
      if (i + 1 >= line.size()) return std::nullopt;
      word += line[++i];
    } else if (std::string("|&;<>()$`*?[]{}~#=\n").find(c) != std::string::npos) {
      return std::nullopt;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

#ifdef MUMOE_CLI_IN_PROCESS
extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

/// The file descriptors of the run in progress, for the crash handler (-1: none).
inline volatile sig_atomic_t g_cli_capture = -1, g_cli_saved_out = -1, g_cli_saved_err = -1;

/// A crash (or a sanitizer's report) during an in-process run: its output, report included, is
/// in the capture file; put stdout and stderr back and copy it there, so the test log shows it.
/// Only async-signal-safe calls.
inline void dump_cli_capture() {
  if (g_cli_capture < 0) return;
  ::dup2(g_cli_saved_out, 1);
  ::dup2(g_cli_saved_err, 2);
  ::lseek(g_cli_capture, 0, SEEK_SET);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(g_cli_capture, buf, sizeof buf)) > 0)
    if (::write(2, buf, static_cast<size_t>(n)) < 0) break;
  g_cli_capture = -1;
}

inline void on_cli_crash(int signal) {
  dump_cli_capture();
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

/// run_mumoe(words) in this process, stdout and stderr (file descriptors 1 and 2, C stdio and
/// the C++ streams) captured together in an unlinked temporary file. The signal dispositions a
/// run sets (SIGXFSZ ignored, SIGINT caught by commands that can be interrupted) are the run's
/// only: an ignored SIGXFSZ would otherwise reach every program the tests start afterwards (an
/// ignored signal survives exec), and a test that checks `ulimit -f` would test nothing.
/// nullopt when the capture cannot be set up (the caller runs the program instead).
inline std::optional<CliRun> run_cli_in_process(std::vector<std::string> words) {
  static const bool prepared = [] {
    mumoe::cli::prepare_process();  // once per process: temporaries' clean-up, the allocator
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(dump_cli_capture);
    return true;
  }();
  (void)prepared;
  words.insert(words.begin(), MUMOE_CLI_PATH);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  char path[] = "/tmp/mumoe-cli-run-XXXXXX";
  const int capture = ::mkstemp(path);
  if (capture < 0) return std::nullopt;
  ::unlink(path);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  if (saved_out < 0 || saved_err < 0) {
    for (int fd : {saved_out, saved_err, capture})
      if (fd >= 0) ::close(fd);
    return std::nullopt;
  }
  constexpr int kSignals[] = {SIGINT, SIGXFSZ, SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
  struct sigaction before[std::size(kSignals)] {};
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], nullptr, &before[i]);
  std::signal(SIGXFSZ, SIG_IGN);  // as the program's main() sets it
  for (int crash : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) std::signal(crash, on_cli_crash);
  g_cli_saved_out = saved_out;
  g_cli_saved_err = saved_err;
  g_cli_capture = capture;
  ::dup2(capture, 1);
  ::dup2(capture, 2);
  std::ios out_format(nullptr), err_format(nullptr);  // a command's stream flags must not leak
  out_format.copyfmt(std::cout);
  err_format.copyfmt(std::cerr);
  CliRun run;
  try {
    run.code = mumoe::cli::run_mumoe(static_cast<int>(words.size()), argv.data());
  } catch (...) {
    run.code = -1;  // run_mumoe reports every error itself: this is a defect, shown as such
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::cout.copyfmt(out_format);
  std::cerr.copyfmt(err_format);
  std::cout.clear();
  std::cerr.clear();
  g_cli_capture = -1;
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  ::close(saved_out);
  ::close(saved_err);
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &before[i], nullptr);
  ::lseek(capture, 0, SEEK_SET);
  std::array<char, 4096> buf{};
  ssize_t n;
  while ((n = ::read(capture, buf.data(), buf.size())) > 0) run.out.append(buf.data(), static_cast<size_t>(n));
  ::close(capture);
  return run;
}
#endif

inline CliRun run_cli(const std::string& args) {
#ifdef MUMOE_CLI_IN_PROCESS
  const char* process = std::getenv("MUMOE_TEST_CLI_PROCESS");
  if (!(process && *process == '1'))
    if (auto words = simple_shell_words(args); words && !words->empty() && words->front() != "slurm")
      if (auto run = run_cli_in_process(std::move(*words))) return *run;
#endif
  return run_shell(std::string(MUMOE_CLI_PATH) + " " + args);
}

/// The run's output as JSON, after checking that it succeeded (a failed run's output is shown).
inline nlohmann::json json_output(const CliRun& run) {
  EXPECT_EQ(run.code, 0) << run.out;
  return nlohmann::json::parse(run.out);
}

}  // namespace mumoe::testkit
