// mumoe init --output F …: writes a freshly initialised μMoE model file (spec §1 initialisation),
// the starting point for training from scratch and a small demo model.
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <iostream>

#include "cli_support.h"
#include "io/output_files.h"
#include "io/errors.h"
#include "model/model_file.h"

namespace mumoe::cli {
namespace {

struct InitOptions {
  std::string output, variant = "cp", experts = "128", tr_ranks = "4,4,64", gate_norm = "batchnorm",
              activation = "entmax15", labels, name = "mumoe";
  int64_t input_dim = 0, output_dim = 0, rank = 64, second_dim = 0, seed = 0;
  bool no_bias = false, input_ln = false, overwrite = false, json = false;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    app->add_option("--output", output, "Model file to write")->required();
    app->add_option("--input-dim", input_dim, "I")->required();
    app->add_option("--output-dim", output_dim, "O (hidden width for a two-layer block)")->required();
    app->add_option("--variant", variant, "cp (default), tr or tt");
    app->add_option("--experts", experts, "Experts per mode, e.g. 128 or 16,8 (hierarchy 2)");
    app->add_option("--rank", rank, "CP rank R (default 64)");
    app->add_option("--tr-ranks", tr_ranks, "TR ring ranks R1,…,R_{E+2} (default 4,4,64)");
    app->add_option("--second-dim", second_dim, "Two-layer block output width (0: single layer)");
    app->add_option("--gate-norm", gate_norm, "batchnorm (default), layernorm or none");
    app->add_option("--activation", activation, "entmax15 (default) or softmax");
    app->add_flag("--input-ln", input_ln, "LayerNorm on the input after gating");
    app->add_flag("--no-bias", no_bias, "No per-expert bias row");
    app->add_option("--labels", labels, "Comma-separated output names");
    app->add_option("--name", name, "Layer name; its tensors get the prefix NAME. (default: top level)");
    app->add_option("--seed", seed, "Random seed (default 0)");
    app->add_flag("--overwrite", overwrite, "Replace an existing output file");
    add_json_flag(app, json, "Print what was written as JSON");
  }
};

int run_init(const InitOptions& o) {
  nn::LayerConfig c;
  c.factorization = nn::parse_factorization(o.variant);
  c.input_dim = o.input_dim;
  c.output_dim = o.output_dim;
  c.expert_dims = parse_int_list(o.experts, "--experts");
  if (c.factorization == nn::Factorization::CP) c.cp_rank = o.rank;
  else c.tr_ranks = parse_int_list(o.tr_ranks, "--tr-ranks");
  if (o.variant == "tt" || o.variant == "TT") c.tr_ranks.front() = 1;
  c.use_bias = !o.no_bias;
  c.gate_norm = nn::parse_gate_norm(o.gate_norm);
  c.gate_activation = nn::parse_gate_activation(o.activation);
  c.input_layer_norm = o.input_ln;
  c.second_dim = o.second_dim;
  c.validate();

  io::check_outputs({{o.output, "--output"}});
  std::error_code ec;
  if (!o.overwrite && std::filesystem::exists(o.output, ec))
    throw UsageError(o.output + " exists; pass --overwrite to replace it");

  torch::manual_seed(static_cast<uint64_t>(o.seed));
  nn::MuMoEBlock block(c);
  model::ModelLayer layer{o.name, o.name == "mumoe" ? "" : o.name + ".", c, false, std::nullopt};
  model::Manifest manifest;
  manifest.layers = {layer};
  manifest.label_names = parse_name_list(o.labels);
  manifest.provenance = {{"created_by", "mumoe init"}, {"seed", o.seed}, {"trained", false}};
  model::save_model_file(o.output, manifest, model::layer_tensors(layer, block));
  if (o.json) {
    std::cout << json_text(nlohmann::json({{"output", o.output},
                                 {"variant", c.variant_name()},
                                 {"layer", o.name},
                                 {"parameters", nn::count_parameters(c).total()}}))
              << "\n";
    return 0;
  }
  std::cout << "wrote " << o.output << " (" << c.variant_name() << ", "
            << nn::count_parameters(c).total() << " parameters)\n";
  return kSuccess;
}

}  // namespace

Command add_init_command(CLI::App& parent) {
  return make_command<InitOptions>(parent, "init",
                                   "Write a freshly initialised μMoE layer or block",
                                   run_init);
}

}  // namespace mumoe::cli
