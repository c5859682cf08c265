// `mumoe`: the command-line face of the core. Every subcommand prints machine-readable JSON on
// request; errors are reported here, at the boundary, with the exit-code contract of
// cli_support.h. Nothing below main() prints errors or exits.
#include <torch/torch.h>

#include <csignal>
#include <iostream>

#include "cli_support.h"
#include "io/allocator_tuning.h"
#include "io/errors.h"
#include "io/file_checks.h"

int main(int argc, char** argv) {
  using namespace mumoe::cli;
  // Past a file-size limit (ulimit -f) the kernel would kill us with SIGXFSZ, silently and with
  // temporaries left behind; ignored, the write fails with EFBIG, which the writers report and
  // clean up after like a full disk.
  std::signal(SIGXFSZ, SIG_IGN);
  mumoe::io::tune_allocator_for_tensors();
  CLI::App app{"mumoe — inspect, run and edit Multilinear Mixture-of-Experts models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(MUMOE_VERSION));
  std::vector<Command> commands = {add_info_command(app), add_forward_command(app),
                                   add_init_command(app), add_train_command(app),
                                   add_evaluate_command(app), add_features_command(app),
                                   add_generate_command(app), add_rewrite_command(app),
                                   add_fairness_command(app), add_export_command(app)};
#ifdef MUMOE_WITH_ANALYSIS
  for (auto add : {add_analyze_command, add_stats_command, add_gallery_command, add_ablate_command,
                    add_edits_command, add_cache_command})
    commands.push_back(add(app));
  commands.push_back(add_steer_command(app));
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kSuccess : kUsage;
  }
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const mumoe::Cancelled&) {
    std::cerr << "\nmumoe: cancelled; everything saved so far is kept\n";
    return kInterrupted;
  } catch (const mumoe::UsageError& e) {
    std::cerr << "mumoe: " << mumoe::io::printable(e.what()) << "\n";
    return kUsage;
  } catch (const mumoe::Error& e) {
    std::cerr << "mumoe: " << mumoe::io::printable(e.what()) << "\n";
    return kBadInput;
  } catch (const c10::Error& e) {
    std::cerr << "mumoe: " << mumoe::io::printable(e.what_without_backtrace()) << "\n";
    return kBadInput;
  } catch (const std::exception& e) {
    std::cerr << "mumoe: " << mumoe::io::printable(e.what()) << "\n";
    return kBadInput;
  }
  return kUsage;
}
