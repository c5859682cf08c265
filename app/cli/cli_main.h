// The `mumoe` program as two calls: main() (main.cpp) is prepare_process() then run_mumoe(),
// after ignoring SIGXFSZ (a write past `ulimit -f` then fails with EFBIG instead of killing the
// program), which a test process must not inherit into the programs it starts.
// The CLI tests call run_mumoe() in their own process for the command lines that need no shell
// (tests/support/cli_runner.h): each run of the program would otherwise pay LibTorch's start,
// ≈ 0.65 s, hundreds of times. Whatever differs between a process of its own and a call is
// therefore kept out of run_mumoe(): process-wide set-up is prepare_process()'s.
#pragma once

namespace mumoe::cli {

/// Process-wide set-up, once per process: temporaries of writes in progress removed when a signal
/// ends the process, the allocator tuned for tensors.
void prepare_process();

/// Parses `argv` (argv[0] is the program), runs the command and reports its errors on stderr;
/// returns the exit code (cli_support.h: 0, 1 usage, 2 bad input, 130 interrupted).
int run_mumoe(int argc, char** argv);

}  // namespace mumoe::cli
