// mumoe info MODEL [--json] [model options] [--remember | --forget]: layers, variant, experts,
// ranks, parameter counts. --remember writes the model options into MODEL's sidecar
// (model/open_options.h) so that every command and the GUI open it so; --forget removes it.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli_support.h"
#include "io/output_files.h"
#include "io/file_checks.h"
#include "io/errors.h"
#include "model/model_summary.h"
#include "model/open_options.h"
#include "model_options.h"

namespace mumoe::cli {
namespace {

struct InfoOptions {
  ModelOptions model;
  bool json = false, remember = false, forget = false;
};

std::string join(const std::vector<int64_t>& v, const char* sep) {
  std::ostringstream out;
  for (size_t i = 0; i < v.size(); ++i) out << (i ? sep : "") << v[i];
  return out.str();
}

std::string grouped(int64_t n) {  // 1069568 → 1,069,568
  auto s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// Names and provenance come from the file: escaped, so a hostile file cannot drive the terminal.
void print_text(const model::ModelSummary& s) {
  using io::printable;
  std::cout << printable(s.path) << " (" << grouped(static_cast<int64_t>(s.file_bytes)) << " bytes)\n"
            << "  format:       "
            << printable(model::format_description(s))
            << "\n  architecture: " << printable(s.architecture) << "\n";
  if (!s.backbone.empty())
    std::cout << "  backbone:     " << printable(s.backbone)
              << (s.backbone_prefix.empty() ? "" : " (keys under '" + printable(s.backbone_prefix) + "')")
              << (s.backbone_preset.empty() ? "" : ", preset " + printable(s.backbone_preset)) << "\n";
  if (!s.gpt_json.is_null()) {
    const auto& g = s.gpt_json;
    const auto heads_from = s.gpt_heads_from == "given"        ? std::string("as given with --heads")
                            : s.gpt_heads_from == "model_args" ? std::string("from the checkpoint's model_args")
                                                               : std::string("guessed: GPT-2's head width of 64 — if the "
                                                                             "model was trained with others, pass --heads N");
    std::cout << "  GPT:          " << g.value("n_layer", 0) << " layers, width " << g.value("n_embd", 0) << ", "
              << g.value("n_head", 0) << " attention heads (" << heads_from << "), context "
              << g.value("block_size", 0) << ", vocabulary " << grouped(g.value("vocab_size", int64_t{0}))
              << (g.value("bias", true) ? "" : ", no biases") << "\n";
  }
  for (const auto& note : s.notes) std::cout << "  note:         " << printable(note) << "\n";
  std::cout
            << "  tensors:      " << s.tensor_count << "\n"
            << "  parameters:   " << grouped(s.total_parameters()) << " in expert layers\n";
  for (const auto& l : s.layers) {
    if (l.router) {
      std::cout << "\n  layer '" << printable(l.name) << "'" << (l.prefix.empty() ? "" : " (keys " + printable(l.prefix) + "*)")
                << "\n    router:      " << l.router_description()
                << "\n    parameters:  " << grouped(l.total_parameters()) << "\n";
      continue;
    }
    const auto& c = l.config;
    std::cout << "\n  layer '" << printable(l.name) << "'" << (l.prefix.empty() ? "" : " (keys " + printable(l.prefix) + "*)") << "\n"
              << "    variant:     " << c.variant_name() << (c.is_block() ? " two-layer block" : " layer")
              << ", hierarchy " << c.hierarchy() << "\n"
              << "    experts:     " << join(c.expert_dims, " × ") << " = " << c.total_experts() << "\n"
              << "    ranks:       "
              << (c.factorization == nn::Factorization::CP ? "R = " + std::to_string(c.cp_rank)
                                                           : "(" + join(c.tr_ranks, ", ") + ")")
              << "\n    shape:       " << c.input_dim << " → " << c.output_dim
              << (c.is_block() ? " → GELU → " + std::to_string(c.second_dim) : "")
              << (c.use_bias ? " (with bias)" : " (no bias)") << "\n"
              << "    gating:      " << nn::to_string(c.gate_norm) << " + " << nn::to_string(c.gate_activation)
              << (c.input_layer_norm ? ", input LayerNorm" : "") << "\n"
              << "    parameters:  " << grouped(l.parameters.total()) << " (factors "
              << grouped(l.parameters.factors) << ", gating " << grouped(l.parameters.gating)
              << (l.parameters.input_norm ? ", input norm " + grouped(l.parameters.input_norm) : "")
              << ")\n";
  }
  if (!s.label_names.empty()) {
    std::cout << "\n  labels (" << s.label_names.size() << "):";
    for (const auto& n : s.label_names) std::cout << " " << printable(n);
    std::cout << "\n";
  }
  if (!s.attribute_names.empty()) {
    std::cout << "  attributes (" << s.attribute_names.size() << "):";
    for (const auto& n : s.attribute_names) std::cout << " " << printable(n);
    std::cout << "\n";
  }
  if (s.provenance_json != "{}") std::cout << "  provenance:   " << printable(s.provenance_json) << "\n";
}

}  // namespace

Command add_info_command(CLI::App& parent) {
  auto opts = std::make_shared<InfoOptions>();
  auto* app = parent.add_subcommand("info", "Show a model's layers, experts, ranks and parameter counts");
  opts->model.add_to(app);
  add_json_flag(app, opts->json);
  app->add_flag("--remember", opts->remember,
                "Remember these model options beside MODEL (MODEL.mumoe.json) for every command and the GUI");
  app->add_flag("--forget", opts->forget, "Remove the remembered options of MODEL (its .mumoe.json)");
  return {app, [opts]() {
            if (opts->remember && opts->forget) throw UsageError("give --remember or --forget, not both");
            std::string note;
            if (opts->remember)
              io::check_outputs({{opts->model.model + ".mumoe.json", "--remember"}},
                                {{opts->model.model, "the model"}, {opts->model.class_names, "--class-names"},
                                 {opts->model.backbone, "the TorchScript backbone"}});
            if (opts->remember)
              note = "remembered in " + model::remember_open_options(opts->model.model, opts->model.overrides());
            if (opts->forget) {
              const auto removed = model::forget_open_options(opts->model.model);
              note = removed.empty() ? "no options were remembered for " + opts->model.model
                                     : "forgot the options remembered in " + removed;
            }
            // After --forget the file opens as it is; after --remember as remembered.
            const auto summary = model::summarize_model_file(
                opts->model.model, opts->forget || opts->remember ? model::LayoutOverrides{} : opts->model.overrides());
            if (!note.empty()) std::cerr << io::printable(note) << "\n";
            if (opts->json)
              std::cout << model::summary_to_json(summary) << "\n";
            else
              print_text(summary);
            return 0;
          }};
}

}  // namespace mumoe::cli
