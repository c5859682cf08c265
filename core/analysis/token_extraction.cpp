#include "analysis/token_extraction.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <optional>

#include "analysis/chunked_run.h"
#include "analysis/content_hash.h"
#include "analysis/lm_forward.h"
#include "analysis/tensor_records.h"
#include "io/errors.h"
#include "nn/device.h"

namespace mumoe::analysis {

cache::RunKey make_token_run_key(const std::string& model_path, const nn::GptConfig& config, const LmEvalSet& set,
                                 int64_t layer,
                                 const TokenExtractionOptions& options) {
  cache::RunKey key;
  key.model_hash = hash_file(model_path);
  key.model_path = model_path;
  key.data_identity = set.identity;
  const std::vector<int64_t> stream(set.stream.begin(), set.stream.end());
  key.data_hash = hash_tensors({torch::tensor(stream, torch::kLong), torch::tensor(set.document_starts, torch::kLong)});
  key.layer = nn::gpt_mlp_layer_name(config, layer);  // "transformer.h.2.mlp.MuMoE_layer" (or "….mlp")
  key.parameters = nlohmann::json({{"extraction", "lm-tokens"},
                                   {"extraction_version", kTokenExtractionVersion},
                                   {"block_size", set.block_size},
                                   {"sequences_per_chunk", options.sequences_per_chunk},
                                   {"dtype", "float32"}})
                       .dump();
  return key;
}

cache::RunInfo make_token_run_info(const nn::MuMoEGpt& gpt, const LmEvalSet& set,
                                   const TokenExtractionOptions& options) {
  if (options.sequences_per_chunk <= 0) throw UsageError("the chunk size must be positive");
  cache::RunInfo info;
  info.sample_count = set.tokens();
  info.chunk_size = options.sequences_per_chunk * set.block_size;
  info.input_dim = gpt->config().n_embd;
  info.output_dim = 1;
  info.expert_dims = {gpt->config().experts};
  info.attribute_count = 0;
  return info;
}

ExtractionSummary extract_token_run(cache::AnalysisCache& cache, const cache::RunKey& key, const nn::MuMoEGpt& gpt,
                                    const LmEvalSet& set, int64_t layer, const TokenExtractionOptions& options,
                                    const ExtractionCallback& progress) {
  const auto info = make_token_run_info(gpt, set, options);
  const auto device = nn::parse_device(options.device);
  std::optional<nn::MuMoEGpt> model;  // chosen (or copied) only when something is computed
  torch::NoGradGuard no_grad;
  const int64_t t = set.block_size;
  // Sequences per forward: a few, so that the activations of one forward stay small (the logits
  // are never whole: next_token_outcomes).
  constexpr int64_t kSequencesPerForward = 2;
  return fill_chunked_run(
      cache, key, info,
      [&](int64_t c) {
        const int64_t first = c * options.sequences_per_chunk;
        const int64_t last = std::min(set.sequences, first + options.sequences_per_chunk);
        if (!model) model = gpt_for_eval(gpt, torch::kFloat32, device);
        const auto n = (last - first) * t;
        cache::ChunkRecord r;
        r.chunk_index = c;
        r.first_sample = first * t;
        r.count = n;
        r.labels.assign(set.stream.begin() + first * t + 1, set.stream.begin() + last * t + 1);
        std::vector<torch::Tensor> coefficients;
        for (int64_t begin = first; begin < last; begin += kSequencesPerForward) {
          const int64_t end = std::min(last, begin + kSequencesPerForward);
          const std::vector<int64_t> ids(set.stream.begin() + begin * t, set.stream.begin() + end * t);
          const std::vector<int64_t> targets(set.stream.begin() + begin * t + 1, set.stream.begin() + end * t + 1);
          const auto pass = forward_at_layer(*model, torch::tensor(ids, torch::kLong).view({end - begin, t}).to(device),
                                             layer, /*with_logits=*/false);
          const auto outcomes = next_token_outcomes(*model, pass.final_stream, torch::tensor(targets, torch::kLong));
          const auto losses = outcomes.losses.cpu();
          if (!torch::isfinite(losses).all().item<bool>())
            throw FileError(key.model_path, "the GPT produced NaN or infinite logits on sequences " +
                                                std::to_string(begin) + "–" + std::to_string(end - 1) + " of " +
                                                set.identity);
          const auto m = (end - begin) * t;
          const auto pred = outcomes.predictions.cpu().contiguous();
          r.predictions.insert(r.predictions.end(), pred.data_ptr<int64_t>(), pred.data_ptr<int64_t>() + m);
          const auto l = losses.to(torch::kFloat64).contiguous();
          r.scores.insert(r.scores.end(), l.data_ptr<double>(), l.data_ptr<double>() + m);
          const auto h = pass.mlp_input.reshape({m, -1}).to(torch::kCPU, torch::kFloat32).contiguous();
          r.inputs.insert(r.inputs.end(), h.data_ptr<float>(), h.data_ptr<float>() + h.numel());
          coefficients.push_back(pass.coefficients.reshape({m, -1}).cpu());
        }
        r.coefficients.push_back(to_sparse_rows(torch::cat(coefficients)));
        return r;
      },
      progress, options.batching);
}

}  // namespace mumoe::analysis
