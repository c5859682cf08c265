// `mumoe`: the command-line face of the core (cli_main.h does the work).
#include <csignal>

#include "cli_main.h"

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) the kernel would kill us with SIGXFSZ, silently and with
  // temporaries left behind; ignored, the write fails with EFBIG, which the writers report and
  // clean up after like a full disk. (In the CLI tests' own process, tests/support/cli_runner.h
  // ignores it for each in-process run only: an ignored signal survives exec.)
  std::signal(SIGXFSZ, SIG_IGN);
  mumoe::cli::prepare_process();
  return mumoe::cli::run_mumoe(argc, argv);
}
