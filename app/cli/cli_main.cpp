// run_mumoe: the command line of `mumoe` from parsing to the exit code (cli_main.h). Every
// subcommand prints machine-readable JSON on request; errors are reported here, at the boundary,
// with the exit-code contract of cli_support.h. Nothing below run_mumoe() prints errors or exits.
#include "cli_main.h"

#include <torch/torch.h>

#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "io/output_files.h"
#include "io/allocator_tuning.h"
#include "io/blas_kernels.h"
#include "io/errors.h"
#include "io/file_checks.h"

namespace mumoe::cli {

void prepare_process() {
  // A temporary file of a write in progress is removed when a signal ends the program
  // (io/output_files.h); the next run sweeps those that SIGKILL left.
  mumoe::io::install_temporary_cleanup();
  mumoe::io::tune_allocator_for_tensors();
}

int run_mumoe(int argc, char** argv) {
  clear_interrupted();  // a run in a process that ran others (the CLI tests) starts afresh
  CLI::App app{"mumoe — inspect, run and edit Multilinear Mixture-of-Experts models"};
  app.require_subcommand(1);
  // The version, then the BLAS kernels in use (io/blas_kernels.h): what a speed report needs.
  app.set_version_flag("--version", [] {
    return std::string(MUMOE_VERSION) + "\n" + mumoe::io::blas_kernels_description();
  });
  std::vector<Command> commands = {add_info_command(app), add_forward_command(app),
                                   add_init_command(app), add_train_command(app),
                                   add_evaluate_command(app), add_features_command(app),
                                   add_generate_command(app), add_rewrite_command(app),
                                   add_fairness_command(app), add_export_command(app)};
#ifdef MUMOE_WITH_ANALYSIS
  for (auto add : {add_analyze_command, add_stats_command, add_gallery_command, add_ablate_command,
                    add_edits_command, add_cache_command, add_compare_command, add_predict_command,
                    add_slurm_command, add_report_command})
    commands.push_back(add(app));
  commands.push_back(add_steer_command(app));
#endif
  // --quiet everywhere: commands without progress output accept it too, so scripts can pass it
  // to any command.
  std::function<void(CLI::App*)> accept_quiet = [&](CLI::App* command) {
    const auto subcommands = command->get_subcommands({});
    for (auto* sub : subcommands) accept_quiet(sub);
    if (command != &app && subcommands.empty() && !command->get_option_no_throw("--quiet"))
      command->add_flag("--quiet", "No progress on stderr (this command reports none; accepted so that every command takes it)");
  };
  accept_quiet(&app);
  app.footer("Run 'mumoe help COMMAND' or 'mumoe COMMAND --help' for a command's options; man mumoe for more.");
  // `mumoe help [COMMAND]` is `mumoe [COMMAND] --help`.
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() >= 2 && args[1] == "help") {
    args.erase(args.begin() + 1);
    args.push_back("--help");
  }
  std::vector<char*> arg_pointers;
  for (auto& a : args) arg_pointers.push_back(a.data());
  try {
    app.parse(static_cast<int>(arg_pointers.size()), arg_pointers.data());
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kSuccess : kUsage;
  }
  // Every error ends the same way: its message, made printable, and the exit code of its kind.
  const auto fail = [](const char* message, int code) {
    std::cerr << "mumoe: " << mumoe::io::printable(message) << "\n";
    return code;
  };
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const mumoe::Cancelled&) {
    std::cerr << "\nmumoe: cancelled; everything saved so far is kept\n";
    return kInterrupted;
  } catch (const mumoe::UsageError& e) {
    return fail(e.what(), kUsage);
  } catch (const mumoe::Error& e) {
    return fail(e.what(), kBadInput);
  } catch (const c10::Error& e) {
    return fail(e.what_without_backtrace(), kBadInput);
  } catch (const std::exception& e) {
    return fail(e.what(), kBadInput);
  }
  return kUsage;
}

}  // namespace mumoe::cli
