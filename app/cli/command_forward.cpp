// mumoe forward MODEL --input IN --output OUT [--layer NAME] [--ablate 3,17] [--device D]:
// runs one μMoE layer/block on tensor `input` and writes `output` and `coefficients.{e}`.
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <chrono>
#include <iostream>

#include "cli_support.h"
#include "io/output_files.h"
#include "io/errors.h"
#include "io/file_checks.h"
#include "io/safetensors.h"
#include "model/model_file.h"
#include "model_options.h"
#include "nn/device.h"

namespace mumoe::cli {
namespace {

struct ForwardOptions {
  ModelOptions model;
  std::string input, input_tensor = "input", output, layer, ablate, device = "cpu";
  bool json = false;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    model.add_to(app);
    app->add_option("--input", input, "Safetensors file with tensor 'input' [B,I] or [B,T,I]")->required();
    app->add_option("--tensor", input_tensor, "Input tensor name (default input; features for files from mumoe features)");
    app->add_option("--output", output, "Safetensors file to write")->required();
    app->add_option("--layer", layer, "Name of the μMoE layer (needed when the model has several)");
    app->add_option("--ablate", ablate, "Experts to ablate: 3,17 (first mode) or MODE:EXPERT");
    add_device_option(app, device);
    add_json_flag(app, json, "Print a JSON summary");
  }
};

int run_forward(const ForwardOptions& o) {
  io::check_outputs({{o.output, "--output"}}, {{o.model.model, "the model"}, {o.input, "the --input file"},
                                              {o.model.backbone, "the TorchScript backbone"},
                                              {o.model.class_names, "--class-names"}});
  const auto ablation = o.ablate.empty() ? nn::ExpertAblation{} : parse_ablation(o.ablate);
  const auto device = nn::parse_device(o.device);
  const auto model = model::ModelFile::load(o.model.model, o.model.overrides());
  const auto& layer = o.layer.empty() ? model.single_layer() : model.layer(o.layer);

  const auto in_file = io::SafetensorsFile::open(o.input);
  auto input = in_file.read(o.input_tensor);
  const std::string what = "tensor '" + o.input_tensor + "'";
  if (!input.is_floating_point())
    throw FileError(o.input, what + " must be floating point");
  if (!torch::isfinite(input).all().item<bool>())
    throw FileError(o.input, what + " contains NaN or infinite values");
  const auto input_dim = layer.input_dim();
  if ((input.dim() != 2 && input.dim() != 3) || input.size(-1) != input_dim)
    throw FileError(o.input, what + " has shape " + c10::str(input.sizes()) + "; layer '" +
                                 layer.name + "' expects [B, " + std::to_string(input_dim) +
                                 "] or [B, T, " + std::to_string(input_dim) + "]");
  // Float64 inputs run in float64 (exactness checks); everything else in float32.
  const auto dtype = input.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  nn::BlockOutput result;
  if (layer.is_router()) {
    // A sparse or soft MoE layer: one expert mode, its coefficients the combine weights.
    if (ablation.experts_per_mode.size() > 1) throw UsageError("a " + layer.family() + " layer has one expert mode");
    auto moe = model.build_router_layer(layer.name, dtype);
    moe->to(device);
    auto out = moe->forward(input.to(device, dtype),
                            ablation.experts_per_mode.empty() ? std::vector<int64_t>{} : ablation.experts_per_mode[0]);
    result = {out.output, {out.coefficients}, out.aux_loss, out.dropped_tokens};
  } else {
    auto block = model.build_layer(layer.name, dtype);
    block->to(device);
    result = block->forward(input.to(device, dtype), ablation);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<io::NamedTensor> tensors = {{"output", result.output.cpu()}};
  for (size_t e = 0; e < result.coefficients.size(); ++e)
    tensors.push_back({"coefficients." + std::to_string(e), result.coefficients[e].cpu()});
  io::write_safetensors(o.output, tensors,
                        {{"mumoe.model", o.model.model}, {"mumoe.layer", layer.name},
                         {"mumoe.ablate", o.ablate}});
  if (o.json) {
    nlohmann::json j = {{"output_file", o.output},
                        {"layer", layer.name},
                        {"output_shape", result.output.sizes().vec()},
                        {"expert_modes", result.coefficients.size()},
                        {"ablated", o.ablate},
                        {"device", o.device},
                        {"seconds", seconds}};
    std::cout << json_text(j) << "\n";
  } else {
    std::cout << "wrote " << o.output << ": output " << result.output.sizes() << " and "
              << result.coefficients.size() << " coefficient tensor(s) from layer '" << layer.name
              << "' in " << seconds << " s\n";
  }
  return kSuccess;
}

}  // namespace

Command add_forward_command(CLI::App& parent) {
  return make_command<ForwardOptions>(parent, "forward",
                                      "Run a μMoE layer on tensor 'input'; write 'output' and 'coefficients.{e}'",
                                      run_forward);
}

}  // namespace mumoe::cli
