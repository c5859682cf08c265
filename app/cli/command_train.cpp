// mumoe train --data SPEC --output FILE [...]: trains a CNN + μMoE-head image classifier on
// image data, or a bare μMoE head on a feature file (features:FILE) — or with --router one of
// the router study's sparse or soft MoE heads (nn/moe_layer.h) in the μMoE head's place, on
// either — with progress and ETA on
// stderr, a checkpoint after every epoch, --resume, and a final evaluation on --test-data
// recorded in the model file's provenance.
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli_support.h"
#include "io/json_file.h"
#include "language_model.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "io/output_files.h"
#include "train/optimizer_file.h"
#include "io/file_checks.h"
#include "model/classifier_model.h"
#include "train/classifier_training.h"

namespace mumoe::cli {
namespace {

struct TrainCommandOptions {
  std::string data = "fashion-mnist:train", test_data = "fashion-mnist:test", output, config_file;
  std::string targets;  ///< "" = multi-class on the labels; "a,b" = multi-label on these attributes
  std::string variant = "cp", experts = "128", tr_ranks = "4,4,32", activation = "entmax15";
  int64_t rank = 64, feature_dim = 128;
  std::string backbone = "cnn2";  ///< image data: "cnn2" (the demo CNN), "vit" (timm layout) or "mixer"
  int64_t patch_size = 7;  ///< the ViT's (feature_dim is its width; --layers and --heads as the GPT's)
  int64_t mlp_experts = 0;  ///< ViT: > 0 makes every block's MLP a μMoE block with this many experts
  int64_t mlp_rank = 0;     ///< its CP rank, or TR's third ring rank (0 = parameter-matched to the dense MLP)
  std::string mlp_variant = "cp";  ///< ViT μMoE MLPs: "cp" or "tr" (ring ranks {4, 4, --mlp-rank})
  std::string mlp_router;   ///< ViT: the MLPs are this router's MoE layers instead of μMoE blocks
  int64_t mlp_hidden = 0;   ///< their experts' hidden width (0 = parameter-matched to the dense MLP)
  /// A sparse or soft MoE head (nn/moe_layer.h) instead of μMoE: its router and options.
  std::string router;
  int64_t top_k = 1, group = 128, slots = 1, expert_hidden = 0;
  double capacity_factor = 1.0;
  train::TrainOptions train;
  LanguageModelRequest lm;  ///< the GPT's own options (text SPECs)
  bool json = false, quiet = false, overwrite = false;
  std::string command_line;
};

// Values from a JSON config file: each known key is applied unless its flag was given on the
// command line (flags win).
void apply_config_file(TrainCommandOptions& o, const CLI::App& app) {
  if (o.config_file.empty()) return;
  std::ifstream in(o.config_file, std::ios::binary);
  if (!in) throw FileError(o.config_file, "cannot open the training configuration");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto j = io::parse_bounded_json(text, o.config_file);
  auto take = [&](const char* key, const char* flag, auto& target) {
    if (j.contains(key) && app.count(flag) == 0) {
      try {
        j.at(key).get_to(target);
      } catch (const nlohmann::json::exception&) {
        throw FileError(o.config_file, std::string("'") + key + "' has the wrong type");
      }
    }
  };
  take("data", "--data", o.data);
  take("test_data", "--test-data", o.test_data);
  take("variant", "--variant", o.variant);
  take("experts", "--experts", o.experts);
  take("rank", "--rank", o.rank);
  take("tr_ranks", "--tr-ranks", o.tr_ranks);
  take("targets", "--targets", o.targets);
  take("activation", "--activation", o.activation);
  take("feature_dim", "--feature-dim", o.feature_dim);
  take("backbone", "--backbone", o.backbone);
  take("patch_size", "--patch-size", o.patch_size);
  take("mlp_experts", "--mlp-experts", o.mlp_experts);
  take("mlp_rank", "--mlp-rank", o.mlp_rank);
  take("mlp_variant", "--mlp-variant", o.mlp_variant);
  take("mlp_router", "--mlp-router", o.mlp_router);
  take("mlp_hidden", "--mlp-hidden", o.mlp_hidden);
  take("epochs", "--epochs", o.train.epochs);
  take("batch_size", "--batch-size", o.train.batch_size);
  take("learning_rate", "--lr", o.train.learning_rate);
  take("weight_decay", "--weight-decay", o.train.weight_decay);
  take("schedule", "--schedule", o.train.schedule);
  take("seed", "--seed", o.train.seed);
  take("device", "--device", o.train.device);
  take("router", "--router", o.router);
  take("top_k", "--top-k", o.top_k);
  take("group", "--group", o.group);
  take("capacity_factor", "--capacity-factor", o.capacity_factor);
  take("slots", "--slots", o.slots);
  take("expert_hidden", "--expert-hidden", o.expert_hidden);
  take("aux_loss_weight", "--aux-loss-weight", o.train.aux_loss_weight);
}

// The router head that --router asks for, on features of width `input_dim` with `classes`
// outputs; its experts are the first number of --experts.
nn::MoELayerConfig router_head_config(const TrainCommandOptions& o, int64_t input_dim, int64_t classes) {
  nn::MoELayerConfig c;
  c.router = nn::parse_router_kind(o.router);
  c.input_dim = input_dim;
  c.output_dim = classes;
  const auto experts = parse_int_list(o.experts, "--experts");
  if (experts.size() != 1) throw UsageError("--router takes one number of experts (--experts N), got " + o.experts);
  c.experts = experts[0];
  c.k = o.top_k;
  c.capacity_factor = o.capacity_factor;
  // Routing depends on the group a sample is in: groups are fixed (never "the whole batch"), so
  // evaluation and analysis see the groups training saw, whatever their batch sizes.
  if (o.group < 1) throw UsageError("--group must be at least 1 (samples routed together)");
  c.group_size = o.group;
  c.slots_per_expert = o.slots;
  c.hidden_dim = o.expert_hidden;
  c.validate();
  return c;
}

std::string duration(double seconds) {
  char buf[32];
  const int s = static_cast<int>(seconds + 0.5);
  std::snprintf(buf, sizeof buf, "%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

int run_train(TrainCommandOptions& o, const CLI::App& app) {
  apply_config_file(o, app);
  // --overwrite replaces an earlier model, never the data being trained on.
  std::vector<io::NamedInput> inputs = {{o.config_file, "the --config file"}};
  for (const auto* spec : {&o.data, &o.test_data})
    if (const auto file = data::feature_file_of(*spec); !file.empty()) inputs.push_back({file, "a data file"});
  io::check_outputs({{o.output, "--output"},
                     {train::optimizer_state_path(o.output), "the optimizer state beside --output"},
                     {model::manifest_sidecar_path(o.output), "--output's manifest"}},
                    inputs);
  std::error_code ec;
  if (!o.overwrite && !o.train.resume && std::filesystem::exists(o.output, ec))
    throw UsageError(o.output + " exists; pass --overwrite to replace it (or --resume to continue)");
  if (is_text_spec(o.data)) {
    // A text SPEC trains the byte-level μMoE GPT; shared flags carry over.
    auto r = o.lm;
    r.data = o.data;
    r.output = o.output;
    r.command_line = o.command_line;
    r.device = o.train.device;
    if (app.count("--experts")) r.experts = parse_int_list(o.experts, "--experts")[0];
    if (app.count("--rank")) r.rank = o.rank;
    if (app.count("--batch-size")) r.batch_size = o.train.batch_size;
    if (app.count("--lr")) r.learning_rate = o.train.learning_rate;
    if (app.count("--weight-decay")) r.weight_decay = o.train.weight_decay;
    if (!o.router.empty())
      throw UsageError("--router gives a classifier a router head; a GPT's MLP blocks take --mlp-router NAME");
    // Flags of other models are refused rather than ignored: a GPT's router MLPs take k = 1,
    // route each sequence as one group and have --experts experts; its μMoE blocks are CP of
    // --rank with entmax15.
    for (const char* flag : {"--top-k", "--group", "--slots", "--mlp-experts", "--mlp-rank", "--mlp-variant", "--expert-hidden",
                             "--variant", "--activation"})
      if (app.count(flag)) throw UsageError(std::string(flag) + " does not apply to a GPT (text data)");
    const bool router_mlps = !o.mlp_router.empty();
    for (const char* flag : {"--mlp-hidden", "--capacity-factor", "--aux-loss-weight"})
      if (!router_mlps && app.count(flag))
        throw UsageError(std::string(flag) + " applies to router MLPs: add --mlp-router softmax-token-choice");
    if (router_mlps && app.count("--rank"))
      throw UsageError("--rank is the μMoE blocks' CP rank; router MLPs take --mlp-hidden");
    r.mlp_router = o.mlp_router;
    r.mlp_hidden = o.mlp_hidden;
    r.capacity_factor = o.capacity_factor;
    r.aux_loss_weight = o.train.aux_loss_weight;
    r.seed = o.train.seed;
    r.resume = o.train.resume;
    r.quiet = o.quiet;
    r.json = o.json;
    return run_train_language_model(r);
  }

  nn::LayerConfig head;
  head.factorization = nn::parse_factorization(o.variant);
  head.input_dim = o.feature_dim;
  head.expert_dims = parse_int_list(o.experts, "--experts");
  if (head.factorization == nn::Factorization::CP) head.cp_rank = o.rank;
  else head.tr_ranks = parse_int_list(o.tr_ranks, "--tr-ranks");
  head.gate_activation = nn::parse_gate_activation(o.activation);

  // --targets turns the task into multi-label: one binary output per named attribute.
  const auto targets = parse_name_list(o.targets);
  const bool multilabel = !targets.empty();
  auto prepare = [&](data::Dataset d) { return multilabel ? data::with_targets(std::move(d), targets) : d; };
  // Training visits every image each epoch, so a streamed folder is decoded into memory once.
  const auto train_data = prepare(data::with_images_in_memory(data::load_dataset(o.data)));
  const auto test_data = o.test_data.empty() ? data::Dataset{} : prepare(data::load_dataset(o.test_data));
  const auto labels = multilabel ? targets : train_data.class_names;
  head.output_dim = static_cast<int64_t>(labels.size());

  if (o.mlp_experts < 0 || o.mlp_rank < 0 || o.mlp_hidden < 0)
    throw UsageError("--mlp-experts, --mlp-rank and --mlp-hidden cannot be negative");
  if (!o.mlp_router.empty() && o.mlp_experts == 0) throw UsageError("--mlp-router needs --mlp-experts N");
  if (o.mlp_experts > 0 && !train_data.has_images())
    throw UsageError("--mlp-experts makes a ViT's MLPs μMoE blocks; " + o.data + " holds features (no backbone to train)");
  torch::manual_seed(o.train.seed);
  // Image data trains a CNN with the head; a feature file trains the head alone on its features.
  auto classifier = [&] {
    if (!o.router.empty() && !train_data.has_images())
      return model::ClassifierModel::from_router_layer(
          nn::MoELayer(router_head_config(o, train_data.features.size(1), head.output_dim)), "head", labels,
          multilabel);
    if (!train_data.has_images()) {
      head.input_dim = train_data.features.size(1);
      return model::ClassifierModel::from_layer(nn::MuMoEBlock(head), "head", labels, multilabel);
    }
    nn::BackboneConfig backbone;
    backbone.in_channels = train_data.images.size(1);
    backbone.image_size = train_data.images.size(2);
    backbone.feature_dim = o.feature_dim;
    if (o.backbone == "vit") {
      // A small timm-layout ViT on the data's own images (no resizing): GELU, LayerNorm eps
      // 1e-6, class-token pooling, as timm's vit defaults; width = --feature-dim.
      backbone.kind = nn::BackboneKind::VisionTransformer;
      backbone.vit.width = o.feature_dim;
      backbone.vit.patch_size = o.patch_size;
      backbone.vit.depth = o.lm.layers;
      backbone.vit.heads = o.lm.heads;
      backbone.vit.mlp_dim = 4 * o.feature_dim;
      if (o.mlp_experts > 0 && !o.mlp_router.empty()) {
        // The router study's MoE layers as the MLPs: routing groups are one image's tokens.
        const auto& v = backbone.vit;
        const auto hidden =
            o.mlp_hidden > 0 ? o.mlp_hidden : nn::parameter_matched_expert_hidden(v.width, v.mlp_dim, o.mlp_experts);
        const int64_t side = backbone.image_size / v.patch_size;
        const int64_t tokens = side * side + 1;  // patches + the class token
        for (int64_t i = 0; i < v.depth; ++i)
          backbone.vit.router_mlps[i] =
              nn::router_mlp_config(nn::parse_router_kind(o.mlp_router), v.width, o.mlp_experts, hidden, tokens);
      } else if (o.mlp_experts > 0) {
        const auto& v = backbone.vit;
        const auto variant = nn::lowercase(o.mlp_variant);
        if (variant != "cp" && variant != "tr") throw UsageError("--mlp-variant must be cp or tr, got '" + o.mlp_variant + "'");
        if (variant == "tr") {
          auto ranks = nn::parameter_matched_tr_ranks(v.width, v.mlp_dim, o.mlp_experts);
          if (o.mlp_rank > 0) ranks[2] = o.mlp_rank;
          for (int64_t i = 0; i < v.depth; ++i)
            backbone.vit.mumoe_mlps[i] = nn::mumoe_tr_mlp_config(v.width, v.mlp_dim, o.mlp_experts, ranks, head.gate_activation);
        } else {
          const auto rank = o.mlp_rank > 0 ? o.mlp_rank : nn::parameter_matched_cp_rank(v.width, v.mlp_dim, o.mlp_experts);
          for (int64_t i = 0; i < v.depth; ++i)
            backbone.vit.mumoe_mlps[i] = nn::mumoe_mlp_config(v.width, v.mlp_dim, o.mlp_experts, rank, head.gate_activation);
        }
      }
    } else if (o.backbone == "mixer") {
      // The μMoE reference's MLP-Mixer (experiments/mlp_mixer.py) on the data's own images: width
      // --feature-dim, --layers blocks, token hidden ≈ 4/3 of the tokens (the S/16's 256 for 196),
      // channel hidden 4·width; --mlp-experts makes every mixing MLP a μMoE block as the script's
      // CPMuMoE (BatchNorm gates, ranks 0.75 of the mixed width unless --mlp-rank); a Linear head.
      if (!o.router.empty() || !o.mlp_router.empty()) throw UsageError("--router and --mlp-router are not for --backbone mixer");
      if (nn::lowercase(o.mlp_variant) != "cp") throw UsageError("--backbone mixer trains CP μMoE mixing MLPs only");
      auto& m = backbone.mixer;
      backbone.kind = nn::BackboneKind::MlpMixer;
      m.width = o.feature_dim;
      m.patch_size = o.patch_size;
      m.depth = o.lm.layers;
      if (backbone.image_size % m.patch_size != 0)
        throw UsageError("--patch-size " + std::to_string(m.patch_size) + " does not divide the images' " +
                         std::to_string(backbone.image_size) + " px");
      const int64_t side = backbone.image_size / m.patch_size, tokens = side * side;
      m.token_hidden = (4 * tokens + 2) / 3;
      m.channel_hidden = 4 * m.width;
      for (int64_t i = 0; o.mlp_experts > 0 && i < m.depth; ++i) {
        m.token_mumoe[i] = nn::mixer_mumoe_config(tokens, m.token_hidden, o.mlp_experts,
                                                  o.mlp_rank > 0 ? o.mlp_rank : std::max<int64_t>(1, tokens * 3 / 4),
                                                  head.gate_activation);
        m.channel_mumoe[i] = nn::mixer_mumoe_config(m.width, m.channel_hidden, o.mlp_experts,
                                                    o.mlp_rank > 0 ? o.mlp_rank : std::max<int64_t>(1, m.width * 3 / 4),
                                                    head.gate_activation);
      }
      return model::ClassifierModel::from_image_classifier(
          nn::ImageClassifier(backbone, nn::LinearHeadConfig{o.feature_dim, head.output_dim}), labels, multilabel);
    } else if (o.backbone != "cnn2") {
      throw UsageError("--backbone must be cnn2, vit or mixer, got '" + o.backbone + "'");
    } else if (o.mlp_experts > 0) {
      throw UsageError("--mlp-experts is for --backbone vit or mixer");
    }
    if (!o.router.empty())
      return model::ClassifierModel::from_image_classifier(
          nn::ImageClassifier(backbone, router_head_config(o, o.feature_dim, head.output_dim)), labels, multilabel);
    return model::ClassifierModel::from_image_classifier(nn::ImageClassifier(backbone, head), labels, multilabel);
  }();
  if (test_data.size() > 0) classifier.check_compatible(test_data);
  nlohmann::json provenance = {{"command", o.command_line},
                               {"data", o.data},
                               {"task", multilabel ? "multilabel" : "multiclass"},
                               {"train_samples", train_data.size()},
                               {"seed", o.train.seed},
                               {"epochs", o.train.epochs},
                               {"batch_size", o.train.batch_size},
                               {"learning_rate", o.train.learning_rate},
                               {"weight_decay", o.train.weight_decay},
                               {"schedule", o.train.schedule},
                               {"optimizer", "AdamW"},
                               {"device", o.train.device},
                               {"aux_loss_weight", o.train.aux_loss_weight},
                               {"libtorch", TORCH_VERSION}};

  // The checkpoint is the output file itself, rewritten atomically after every epoch.
  o.train.checkpoint_path = o.output;
  auto write_checkpoint = [&](const std::string& path, int64_t completed) {
    auto p = provenance;
    p["completed_epochs"] = completed;
    classifier.save(path, p);
  };
  auto read_checkpoint = [&](const std::string& path) -> int64_t {
    const auto file = model::ModelFile::load(path);
    classifier.load_weights(file);
    const int64_t done = file.manifest().provenance.value("completed_epochs", int64_t{0});
    if (!o.quiet) std::cerr << "resuming " << path << " after epoch " << done << "\n";
    return done;
  };

  auto last_print = std::chrono::steady_clock::now() - std::chrono::seconds(10);
  auto on_progress = [&](const train::TrainProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (!o.quiet && (now - last_print > std::chrono::seconds(2) || p.step == p.steps_per_epoch)) {
      last_print = now;
      std::cerr << "\repoch " << p.epoch + 1 << "/" << p.epochs << "  step " << p.step << "/" << p.steps_per_epoch
                << "  loss " << p.loss << "  elapsed " << duration(p.elapsed_seconds) << "  ETA "
                << duration(p.eta_seconds) << "   " << (p.step == p.steps_per_epoch ? "\n" : "") << std::flush;
    }
    return true;
  };
  const auto result = train::train_classifier(classifier, train_data, o.train, on_progress, write_checkpoint,
                                              read_checkpoint);
  provenance["train_seconds_this_run"] = result.seconds;
  provenance["epoch_losses_this_run"] = result.epoch_losses;
  provenance["completed_epochs"] = o.train.epochs;
  nlohmann::json metrics = nlohmann::json::object();
  if (test_data.size() > 0) {
    const auto eval = train::evaluate_classifier(classifier, test_data, 500, o.train.device);
    metrics = {{"data", o.test_data},
               {"samples", eval.samples},
               {"accuracy", eval.accuracy},
               {"mean_loss", eval.mean_loss},
               {"per_class_accuracy", eval.per_class_accuracy}};
    provenance["test_metrics"] = metrics;
  }
  classifier.module().to(torch::kCPU);
  classifier.save(o.output, provenance);
  // The run is complete: there is nothing left to resume, so the optimizer state goes.
  std::filesystem::remove(o.output + ".optim.pt", ec);
  if (o.json) {
    std::cout << json_text(nlohmann::json({{"output", o.output}, {"seconds", result.seconds}, {"test", metrics}})) << "\n";
  } else {
    std::cout << "wrote " << o.output << " after " << duration(result.seconds);
    if (test_data.size() > 0) std::cout << "; test accuracy " << metrics["accuracy"].get<double>();
    std::cout << "\n";
  }
  return kSuccess;
}

}  // namespace

Command add_train_command(CLI::App& parent) {
  auto o = std::make_shared<TrainCommandOptions>();
  auto* app = parent.add_subcommand("train", "Train a CNN + μMoE-head classifier, or a μMoE head on features");
  app->add_option("--output", o->output, "Model file to write (also the per-epoch checkpoint)")->required();
  app->add_option("--data", o->data,
                  "Training data SPEC (default fashion-mnist:train; features:FILE trains a bare head; "
                  "fortunes or text:FILE trains the byte-level μMoE GPT)");
  app->add_option("--test-data", o->test_data, "Evaluation data SPEC (default fashion-mnist:test; '' for none)");
  app->add_option("--config", o->config_file, "JSON file with any of the options below (flags win)");
  app->add_option("--targets", o->targets,
                  "Multi-label task: comma-separated attributes of the data, one binary output each "
                  "(BCE loss), e.g. footwear,long_sleeves (default: multi-class on the labels)");
  app->add_option("--variant", o->variant, "Head factorization: cp (default), tr or tt");
  app->add_option("--experts", o->experts, "Experts per mode (default 128)");
  app->add_option("--rank", o->rank, "CP rank (default 64)");
  app->add_option("--tr-ranks", o->tr_ranks, "TR ranks (default 4,4,32)");
  app->add_option("--activation", o->activation, "entmax15 (default) or softmax");
  app->add_option("--feature-dim", o->feature_dim, "Backbone feature width = head input (default 128)");
  app->add_option("--backbone", o->backbone,
                  "For image data: cnn2 (the demo CNN, default), vit (a timm-layout Vision Transformer of width "
                  "--feature-dim) or mixer (the μMoE reference's MLP-Mixer of width --feature-dim, a Linear head)");
  app->add_option("--patch-size", o->patch_size, "ViT or Mixer patch size (default 7; must divide the image size)");
  app->add_option("--mlp-experts", o->mlp_experts,
                  "ViT: make every block's MLP (Mixer: every mixing MLP) a μMoE two-layer block with this many experts (default 0: plain MLPs)");
  app->add_option("--mlp-rank", o->mlp_rank,
                  "ViT μMoE MLPs: CP rank, or TR's third ring rank (default: parameter-matched to the dense MLP)");
  app->add_option("--mlp-variant", o->mlp_variant,
                  "ViT μMoE MLPs: cp (default) or tr (ring ranks {4, 4, r}, r parameter-matched or --mlp-rank)");
  app->add_option("--mlp-router", o->mlp_router,
                  "ViT: make the --mlp-experts MLPs a router's MoE layers instead of μMoE blocks (the --router names); "
                  "text: make the GPT's MLP blocks --experts experts of a causal router (softmax-token-choice)");
  app->add_option("--mlp-hidden", o->mlp_hidden,
                  "Router MLPs (ViT, GPT): each expert's hidden width (default: parameter-matched to the dense MLP)");
  app->add_option("--router", o->router,
                  "A sparse or soft MoE head instead of μMoE (on features, or on the trained backbone's features for "
                  "image data): softmax-token-choice, "
                  "sinkhorn-token-choice, softmax-expert-choice, sinkhorn-expert-choice, sparsity-expert-choice "
                  "or soft-moe (experts = --experts)");
  app->add_option("--top-k", o->top_k, "Router head, token choice: experts per sample (default 1)");
  app->add_option("--group", o->group, "Router head: samples routed together (default 128)");
  app->add_option("--capacity-factor", o->capacity_factor, "Router head: buffer capacity factor c (default 1)");
  app->add_option("--slots", o->slots, "Soft MoE: slots per expert (default 1)");
  app->add_option("--expert-hidden", o->expert_hidden,
                  "Router head: each expert an MLP with this hidden width (default 0: linear experts)");
  app->add_option("--aux-loss-weight", o->train.aux_loss_weight,
                  "Router head: weight of the importance loss (Softmax Token Choice only; default 0.01)");
  app->add_option("--epochs", o->train.epochs, "Epochs (default 10)");
  app->add_option("--batch-size", o->train.batch_size, "Batch size (default 128)");
  app->add_option("--lr", o->train.learning_rate, "Peak learning rate (default 2e-3)");
  app->add_option("--weight-decay", o->train.weight_decay, "AdamW weight decay (default 1e-4)");
  app->add_option("--schedule", o->train.schedule, "cosine (default) or constant");
  app->add_option("--seed", o->train.seed, "Random seed (default 0)");
  add_device_option(app, o->train.device);
  app->add_flag("--resume", o->train.resume, "Continue from the checkpoint in --output");
  // The byte-level μMoE GPT (data SPEC fortunes[:DIR] or text:FILE|DIR).
  app->add_option("--steps", o->lm.steps, "GPT: optimizer steps (default 2000)");
  app->add_option("--block-size", o->lm.block_size, "GPT: context length in bytes (default 128)");
  app->add_option("--layers", o->lm.layers, "GPT or ViT: transformer blocks (default 4)");
  app->add_option("--heads", o->lm.heads, "GPT or ViT: attention heads (default 4)");
  app->add_option("--embd", o->lm.embd, "GPT: width (default 128)");
  app->add_option("--tokenizer", o->lm.tokenizer,
                  "GPT: byte (default), gpt2 (GPT-2's BPE, shipped) or a directory with vocab.json + merges.txt");
  app->add_option("--warmup", o->lm.warmup, "GPT: warm-up steps (default 100)");
  app->add_option("--checkpoint-every", o->lm.checkpoint_every, "GPT: steps between checkpoints (default 250)");
  app->add_option("--validation-fraction", o->lm.validation_fraction,
                  "GPT: documents held out for validation (default 0.05)");
  app->add_flag("--overwrite", o->overwrite, "Replace an existing output file");
  add_quiet_flag(app, o->quiet);
  add_json_flag(app, o->json, "Print a JSON summary");
  return {app, [o, app]() {
            o->command_line = "mumoe train";
            for (const auto* opt : app->get_options())
              if (opt->count() > 0 && opt->get_name() != "--help") {
                o->command_line += " " + opt->get_name();
                if (opt->get_expected_min() > 0)  // flags carry no value worth recording
                  for (const auto& r : opt->results()) o->command_line += " " + r;
              }
            return run_train(*o, *app);
          }};
}

}  // namespace mumoe::cli
