// Shared helpers of the `mumoe` command-line tool: list parsing and the exit-code contract.
//
// Exit codes: 0 success, 1 usage error, 2 unreadable or invalid input (the message names the
// file and what is wrong), 130 cancelled by Ctrl-C (what was saved stays valid).
#pragma once

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/expert_ablation.h"

namespace mumoe::cli {

/// The options most commands take, each with one wording: `--json` ("Print JSON" unless `what`
/// says what the JSON holds), `--quiet` (no progress on stderr) and `--device` (cpu or cuda[:N]).
CLI::Option* add_json_flag(CLI::App* app, bool& json, const std::string& what = "Print JSON");
CLI::Option* add_quiet_flag(CLI::App* app, bool& quiet);
CLI::Option* add_device_option(CLI::App* app, std::string& device, const std::string& what = "cpu (default) or cuda[:N]");

/// `j` as the CLI prints it (indent 2). Strings from files — class-folder names, labels, text —
/// need not be UTF-8: invalid bytes become U+FFFD instead of failing the whole output.
inline std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

enum ExitCode { kSuccess = 0, kUsage = 1, kBadInput = 2, kInterrupted = 130 };

/// "3,17" → {3, 17}. Throws UsageError naming `what` on anything that is not a list of integers.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);
/// "a,b,c" → {"a","b","c"} (empty text → empty list).
std::vector<std::string> parse_name_list(const std::string& text);
/// "3,17" ablates experts 3 and 17 of the first expert mode; "1:5" expert 5 of mode 1.
nn::ExpertAblation parse_ablation(const std::string& text);

/// Ctrl-C during long work: catch_interrupts() makes SIGINT set a flag instead of killing the
/// process (idempotent; returns the handler it replaced), interrupted() tells whether it came, so
/// progress callbacks can cancel cleanly (exit 130, everything saved so far kept).
using SignalHandler = void (*)(int);
SignalHandler catch_interrupts();
bool interrupted();
/// Forgets an earlier Ctrl-C (before a new piece of work that may be interrupted).
void clear_interrupted();

/// Every subcommand registers itself on the app; `run` is called after parsing succeeded.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// The usual subcommand: its options are one fresh `Options`, whose `add_to(app)` declares them on
/// the new subcommand, and `run(options)` runs it once parsing has succeeded. (Commands with
/// subcommands of their own build their Command by hand.)
template <typename Options, typename Run>
Command make_command(CLI::App& parent, const std::string& name, const std::string& description, Run run) {
  auto options = std::make_shared<Options>();
  auto* app = parent.add_subcommand(name, description);
  options->add_to(app);
  return {app, [options, run]() { return run(*options); }};
}

Command add_info_command(CLI::App& parent);
Command add_forward_command(CLI::App& parent);
Command add_init_command(CLI::App& parent);
Command add_train_command(CLI::App& parent);
Command add_evaluate_command(CLI::App& parent);
Command add_features_command(CLI::App& parent);
Command add_generate_command(CLI::App& parent);
Command add_rewrite_command(CLI::App& parent);
Command add_fairness_command(CLI::App& parent);
Command add_export_command(CLI::App& parent);
#ifdef MUMOE_WITH_ANALYSIS
Command add_analyze_command(CLI::App& parent);
Command add_stats_command(CLI::App& parent);
Command add_gallery_command(CLI::App& parent);
Command add_ablate_command(CLI::App& parent);
Command add_edits_command(CLI::App& parent);
Command add_cache_command(CLI::App& parent);
Command add_compare_command(CLI::App& parent);
Command add_steer_command(CLI::App& parent);
Command add_predict_command(CLI::App& parent);
Command add_slurm_command(CLI::App& parent);
Command add_report_command(CLI::App& parent);
#endif

}  // namespace mumoe::cli
