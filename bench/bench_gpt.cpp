// mumoe-bench-gpt: tokens per second through a μMoE GPT (a nanoGPT ckpt.pt, bench/bench_gpt.py
// writes one of GPT-2-124M's shape), two ways:
//   forward     the float32 forward with every MLP block's coefficients kept (what
//               `mumoe predict --coefficients` computes per batch; PyTorch's side in
//               bench/bench_gpt.py times the same);
//   extraction  what `mumoe analyze` does for one block: extract_token_run into a fresh cache
//               (the float64 copy of the model, the pass, losses, predictions, h_L and sparse
//               coefficients written to SQLite).
// The windows are the same ids as PyTorch's side: (k · 7919 + 13) mod 50257.
//
// Usage: mumoe-bench-gpt CKPT [--mode forward|extraction] [--batch 2] [--repeats 3] [--threads 2] [--layer 11]
// Prints one JSON line: mode, tokens, median and best seconds, tokens/s.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "analysis/lm_eval_set.h"
#include "analysis/token_extraction.h"
#include "cache/analysis_cache.h"
#include "io/allocator_tuning.h"
#include "model/gpt_file.h"
#include "model/model_file.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: mumoe-bench-gpt CKPT [--mode forward|extraction] [--batch N] [--repeats N] [--threads N] "
                 "[--layer L]\n";
    return 1;
  }
  std::string path = argv[1], mode = "forward";
  int64_t batch = 2, repeats = 3, threads = 2, layer = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--mode") mode = argv[i + 1];
    else if (flag == "--batch") batch = std::stoll(argv[i + 1]);
    else if (flag == "--repeats") repeats = std::stoll(argv[i + 1]);
    else if (flag == "--threads") threads = std::stoll(argv[i + 1]);
    else if (flag == "--layer") layer = std::stoll(argv[i + 1]);
    else { std::cerr << "unknown option " << flag << "\n"; return 1; }
  }
  mumoe::io::tune_allocator_for_tensors();  // as the programs do (app/cli/main.cpp)
  try {
    torch::set_num_threads(static_cast<int>(threads));
    const auto file = mumoe::model::ModelFile::load(path);
    auto gpt = mumoe::model::load_gpt(file);
    const auto& config = gpt->config();
    const int64_t T = config.block_size, tokens = batch * T;
    if (layer < 0) layer = config.n_layer - 1;
    std::vector<int32_t> stream(tokens + 1);
    for (int64_t k = 0; k <= tokens; ++k) stream[k] = static_cast<int32_t>((k * 7919 + 13) % 50257);
    const auto set = mumoe::analysis::make_lm_eval_set(stream, {0}, T, batch, "bench");
    const auto ids = torch::tensor(std::vector<int64_t>(stream.begin(), stream.end() - 1)).view({batch, T});
    const auto scratch = std::filesystem::temp_directory_path() / ("mumoe-bench-gpt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(scratch);
    int64_t run_index = 0;
    auto run = [&] {
      torch::NoGradGuard no_grad;
      if (mode == "forward") {
        gpt->eval();
        const auto out = gpt->forward(ids);
        double kept = 0;
        for (const auto& c : out.coefficients)
          if (c.defined()) kept += c.sum().item<double>();
        return kept + out.logits.sum().item<double>();
      }
      if (mode != "extraction") throw std::runtime_error("--mode is forward or extraction");
      const auto cache_path = (scratch / ("cache-" + std::to_string(run_index++) + ".sqlite")).string();
      auto cache = mumoe::cache::AnalysisCache::open(cache_path);
      mumoe::analysis::TokenExtractionOptions options;
      options.sequences_per_chunk = batch;
      const auto key = mumoe::analysis::make_token_run_key(path, config, set, layer, options);
      const auto summary = mumoe::analysis::extract_token_run(*cache, key, gpt, set, layer, options);
      return static_cast<double>(summary.chunks_computed);
    };
    run();  // warm-up
    std::vector<double> seconds;
    for (int64_t r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      run();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::filesystem::remove_all(scratch);
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    std::cout << "{\"impl\": \"mumoe\", \"mode\": \"" << mode << "\", \"batch\": " << batch << ", \"tokens\": " << tokens
              << ", \"repeats\": " << repeats << ", \"threads\": " << threads << ", \"median_s\": " << median
              << ", \"best_s\": " << seconds.front() << ", \"tokens_per_s\": " << tokens / median << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "mumoe-bench-gpt: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
