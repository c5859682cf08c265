// `mumoe`: the command-line face of the core (cli_main.h does the work).
#include "cli_main.h"

int main(int argc, char** argv) {
  mumoe::cli::prepare_process();
  return mumoe::cli::run_mumoe(argc, argv);
}
