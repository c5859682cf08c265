// mumoe-bench-backbone: images per second through an image classifier's backbone + head with the
// coefficients of every expert layer kept (the head's, and each μMoE layer inside a ViT or
// MLP-Mixer: what `mumoe predict --coefficients` computes per batch) — on random images already at
// the backbone's input size and normalised (decoding and resizing are not timed; PyTorch's side
// in bench/bench_backbone.py times the same).
//
// Usage: mumoe-bench-backbone MODEL [--batch 32] [--repeats 5] [--threads 2] [--preset NAME]
// Prints one JSON line: batch, repeats, threads, median and best seconds per batch, images/s.
// MUMOE_BENCH_TRACE=FILE also writes LibTorch's profile of the timed batches (Chrome trace JSON):
// where the time goes, op by op.
#include <torch/torch.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <cstdlib>
#include <fstream>
#include <memory>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "model/classifier_model.h"
#include "model/model_file.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: mumoe-bench-backbone MODEL [--batch N] [--repeats N] [--threads N] [--preset NAME]\n";
    return 1;
  }
  std::string path = argv[1], preset;
  int64_t batch = 32, repeats = 5, threads = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--batch") batch = std::stoll(argv[i + 1]);
    else if (flag == "--repeats") repeats = std::stoll(argv[i + 1]);
    else if (flag == "--threads") threads = std::stoll(argv[i + 1]);
    else if (flag == "--preset") preset = argv[i + 1];
    else { std::cerr << "unknown option " << flag << "\n"; return 1; }
  }
  try {
    torch::set_num_threads(static_cast<int>(threads));
    mumoe::model::LayoutOverrides overrides;
    overrides.backbone_preset = preset;
    const auto file = mumoe::model::ModelFile::load(path, overrides);
    auto model = mumoe::model::ClassifierModel::load(file);
    if (!model.has_backbone()) throw std::runtime_error(path + " has no image backbone");
    auto classifier = model.image_classifier();
    const auto& b = classifier->backbone_config();
    torch::manual_seed(0);
    const auto images = torch::randn({batch, b.in_channels, b.image_size, b.image_size});
    torch::NoGradGuard no_grad;
    // The backbone module itself: the timed input is already preprocessed.
    const auto backbone = std::dynamic_pointer_cast<mumoe::nn::BackboneImpl>(classifier->named_children()["backbone"]);
    auto run = [&] {
      double kept = 0;
      torch::Tensor features;
      if (auto* tokens = backbone->tokens()) {
        auto x = tokens->embed(images);
        for (int64_t step = 0; step < tokens->depth(); ++step) {
          const auto attended = tokens->attention_residual(x, step);
          if (tokens->mumoe_mlp(step).is_empty()) {
            x = tokens->mlp_residual(attended, step);
            continue;
          }
          std::vector<torch::Tensor> coefficients;
          x = tokens->mlp_residual_keeping(attended, step, coefficients);
          kept += coefficients.at(0).sum().item<double>();
        }
        features = tokens->pool(x);
      } else {
        features = backbone->forward(images);
      }
      auto out = classifier->classify(features);
      for (const auto& c : out.coefficients) kept += c.sum().item<double>();
      return kept + out.output.sum().item<double>();
    };
    run();  // warm-up
    // The profiler records the timed batches only (the warm-up is done).
    std::unique_ptr<std::ofstream> trace_file;
    std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
    if (const char* trace = std::getenv("MUMOE_BENCH_TRACE")) {
      trace_file = std::make_unique<std::ofstream>(trace);
      profile = std::make_unique<torch::autograd::profiler::RecordProfile>(*trace_file);
    }
    std::vector<double> seconds;
    for (int64_t r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      run();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    std::cout << "{\"impl\": \"mumoe\", \"backbone\": \"" << b.describe() << "\", \"batch\": " << batch
              << ", \"repeats\": " << repeats << ", \"threads\": " << threads << ", \"median_s\": " << median
              << ", \"best_s\": " << seconds.front() << ", \"images_per_s\": " << batch / median << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "mumoe-bench-backbone: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
