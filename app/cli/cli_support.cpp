#include "cli_support.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <sstream>

#include "io/errors.h"
#include "model/open_options.h"
#include "nn/backbone_config.h"

namespace mumoe::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

}  // namespace

SignalHandler catch_interrupts() { return std::signal(SIGINT, on_sigint); }
bool interrupted() { return g_interrupted.load(); }
void clear_interrupted() { g_interrupted = false; }

CLI::Option* add_json_flag(CLI::App* app, bool& json, const std::string& what) {
  return app->add_flag("--json", json, what);
}

CLI::Option* add_quiet_flag(CLI::App* app, bool& quiet) { return app->add_flag("--quiet", quiet, "No progress on stderr"); }

CLI::Option* add_device_option(CLI::App* app, std::string& device, const std::string& what) {
  return app->add_option("--device", device, what);
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    try {
      out.push_back(std::stoll(item, &used));
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw UsageError(what + ": '" + item + "' is not an integer (expected e.g. 3,17)");
  }
  if (out.empty()) throw UsageError(what + ": empty list");
  return out;
}

std::vector<std::string> parse_name_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

nn::ExpertAblation parse_ablation(const std::string& text) {
  nn::ExpertAblation ablation;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t mode = 0;
    auto colon = item.find(':');
    if (colon != std::string::npos) {
      mode = static_cast<size_t>(parse_int_list(item.substr(0, colon), "--ablate mode")[0]);
      item = item.substr(colon + 1);
    }
    const auto expert = parse_int_list(item, "--ablate")[0];
    if (ablation.experts_per_mode.size() <= mode) ablation.experts_per_mode.resize(mode + 1);
    ablation.experts_per_mode[mode].push_back(expert);
  }
  if (ablation.empty()) throw UsageError("--ablate: empty list");
  return ablation;
}

}  // namespace mumoe::cli

#include "model_options.h"

namespace mumoe::cli {

void ModelOptions::add_to(CLI::App* app) {
  app->add_option("MODEL", model,
                  "Model file: a mumoe model, or a PyTorch state_dict as safetensors or as a torch.save "
                  "checkpoint (.pth/.pt)")
      ->required();
  app->add_option("--key", key,
                  "Which state dict of a .pth checkpoint that holds several (e.g. model, state_dict); default: "
                  "the only one");
  app->add_option("--activation", activation,
                  "Gate activation for a plain state_dict: entmax15 (default) or softmax");
  app->add_option("--gate-norm", gate_norm,
                  "Gate normalisation for a state_dict without BatchNorm buffers: layernorm "
                  "(default) or none");
  app->add_option("--labels", labels, "Comma-separated output (label) names");
  app->add_option("--class-names", class_names,
                  "Output (label) names from a file: one per line, a JSON list, or a JSON object index → name "
                  "(or → [id, name], as imagenet_class_index.json)");
  app->add_option("--preset", preset,
                  "For a ViT or ResNet backbone: what its weights cannot say (MLP activation, LayerNorm eps, "
                  "preprocessing): vit_base_patch32_clip_224.openai, vit_base_patch16_224.dino, vit or resnet; "
                  "default: the CLIP preset for a CLIP-style ViT (norm_pre, no patch bias), vit for other ViTs, "
                  "resnet for ResNets");
  app->add_option("--heads", heads,
                  "Attention heads of a ViT, or of a plain nanoGPT state dict (default: its model_args, else "
                  "width / 64)");
  app->add_option("--tokenizer", tokenizer,
                  "A GPT's tokenizer: byte, gpt2 (GPT-2's BPE, shipped) or a directory with vocab.json + merges.txt "
                  "(default: the model's own; GPT-2's for a vocabulary of 50,257–50,304)");
  app->add_option("--backbone", backbone,
                  "A TorchScript backbone (torch.jit.trace + save) mapping normalised images [B, 3, S, S] to "
                  "features [B, D]; MODEL is then its μMoE head");
  app->add_option("--image-size", image_size, "Input size S of a ResNet or TorchScript backbone (default 224)");
}

model::LayoutOverrides ModelOptions::overrides() const {
  model::LayoutOverrides o;
  if (!activation.empty()) o.gate_activation = nn::parse_gate_activation(activation);
  if (!gate_norm.empty()) o.gate_norm_without_bn = nn::parse_gate_norm(gate_norm);
  if (!labels.empty() && !class_names.empty()) throw UsageError("give --labels or --class-names, not both");
  if (!labels.empty()) o.label_names = parse_name_list(labels);
  if (!class_names.empty()) o.label_names = model::read_class_names(class_names);
  o.checkpoint_key = key;
  if (!preset.empty()) {
    const auto names = nn::backbone_preset_names();
    if (std::find(names.begin(), names.end(), preset) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw UsageError("unknown preset '" + preset + "' (presets: " + list + ")");
    }
  }
  o.backbone_preset = preset;
  o.vit_heads = heads;
  o.torchscript_backbone = backbone;
  o.image_size = image_size;
  return o;
}

}  // namespace mumoe::cli
