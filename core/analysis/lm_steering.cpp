#include "analysis/lm_steering.h"
#include "io/number_text.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "analysis/lm_steered_generation.h"
#include "io/errors.h"
#include "model/gpt_file.h"
#include "nn/token_sampling.h"
#include "text/byte_tokenizer.h"

namespace mumoe::analysis {

std::string to_string(SteeringSite site) { return site == SteeringSite::Residual ? "residual" : "mlp-input"; }

SteeringSite parse_steering_site(const std::string& text) {
  if (text == "mlp-input") return SteeringSite::MlpInput;
  if (text == "residual") return SteeringSite::Residual;
  throw UsageError("unknown steering site '" + text + "' (mlp-input or residual)");
}

SteeringVector compute_steering_vector(const RunData& run, int64_t layer, int64_t expert, const CentreOptions& options) {
  if (run.columns.empty() || run.info.expert_dims.empty()) throw UsageError("the run has no expert coefficients");
  const int64_t n = run.info.expert_dims.front();
  if (expert < 0 || expert >= n)
    throw UsageError("expert " + std::to_string(expert) + " does not exist: the layer has experts 0–" +
                     std::to_string(n - 1));
  const int64_t dim = run.info.input_dim;
  if (dim <= 0 || static_cast<int64_t>(run.inputs.size()) != run.samples() * dim)
    throw UsageError("the run stores no layer inputs, so there is no cluster centre to compute");
  const auto& cols = run.columns.front();
  SteeringVector v;
  v.layer = layer;
  v.expert = expert;
  v.options = options;
  v.centre.assign(static_cast<size_t>(dim), 0.0);
  double largest = 0;
  for (int64_t i = cols.offsets[expert]; i < cols.offsets[expert + 1]; ++i) {
    const double a = cols.values[i];
    largest = std::max(largest, a);
    if (!(a >= options.threshold)) continue;
    const double w = options.weighted ? a : 1.0;
    const float* h = run.inputs.data() + cols.samples[i] * dim;
    for (int64_t c = 0; c < dim; ++c) v.centre[c] += w * static_cast<double>(h[c]);
    v.weight_sum += w;
    ++v.tokens_used;
  }
  if (v.tokens_used == 0 || v.weight_sum <= 0)
    throw UsageError("expert " + std::to_string(expert) + " has no token with a_n ≥ " + io::significant_text(options.threshold, 3) +
                     " in the evaluation set (its largest a_n is " + io::significant_text(largest, 3) +
                     "): lower the threshold or pick another expert");
  double sq = 0;
  for (auto& c : v.centre) {
    c /= v.weight_sum;
    sq += c * c;
  }
  v.norm = std::sqrt(sq);
  return v;
}

GptSummary describe_gpt(const std::string& model_path) {
  const auto gpt = model::load_gpt(model::ModelFile::load(model_path));
  const auto& c = gpt->config();
  GptSummary s{c.n_layer, c.experts, c.n_embd, c.block_size, {}};
  for (int64_t l = 0; l < c.n_layer; ++l) s.layer_names.push_back(nn::gpt_mlp_layer_name(c, l));
  return s;
}

// ---------------------------------------------------------------------------------------------

torch::Tensor centre_tensor(const SteeringVector& vector) {
  return torch::tensor(vector.centre, torch::kFloat64);
}

torch::Tensor steered_logits(nn::MuMoEGpt& gpt, const torch::Tensor& idx, const SteeringHook& hook) {
  const auto& config = gpt->config();
  if (idx.dim() != 2 || idx.size(1) < 1 || idx.size(1) > config.block_size)
    throw UsageError("steered_logits expects token ids [B, T] with 1 ≤ T ≤ block_size");
  if (hook.layer < 0 || hook.layer >= config.n_layer)
    throw UsageError("steering layer " + std::to_string(hook.layer) + " does not exist: the GPT has layers 0–" +
                     std::to_string(config.n_layer - 1));
  const bool active = hook.alpha != 0 && hook.centre.defined() && hook.centre.numel() > 0;
  torch::Tensor shift;
  if (active) {
    if (hook.centre.numel() != config.n_embd)
      throw UsageError("the steering vector has " + std::to_string(hook.centre.numel()) + " entries, the GPT's width is " +
                       std::to_string(config.n_embd));
    const auto& w = gpt->wte()->weight;
    shift = (hook.centre.to(torch::kCPU, torch::kFloat64).reshape({config.n_embd}) * hook.alpha)
                .to(w.device(), w.scalar_type());
  }
  torch::NoGradGuard no_grad;
  // MuMoEGptImpl::embed in eval mode (its dropout is the identity).
  const auto ids = idx.to(gpt->wte()->weight.device(), torch::kLong);
  const auto positions = torch::arange(idx.size(1), torch::dtype(torch::kLong).device(ids.device()));
  auto x = gpt->wte()->forward(ids) + gpt->wpe()->forward(positions);
  for (int64_t l = 0; l < config.n_layer; ++l) {
    auto b = gpt->block(l);
    auto h = b->attention_residual(x);
    if (l == hook.layer && active) {
      if (hook.site == SteeringSite::Residual) {
        h = h + shift;
      } else {
        // Only the μMoE layer sees the shift; the skip connection carries h unchanged.
        x = h + b->mlp_branch(h + shift).output;
        continue;
      }
    }
    x = b->mlp_residual(h).output;
  }
  return torch::nn::functional::linear(gpt->ln_f()->forward(x), gpt->wte()->weight);
}

namespace {

// Puts the module in eval mode and restores its mode (MuMoEGptImpl's ModeGuard is private).
struct EvalGuard {
  torch::nn::Module& m;
  bool was_training;
  explicit EvalGuard(torch::nn::Module& module) : m(module), was_training(module.is_training()) { m.eval(); }
  ~EvalGuard() { m.train(was_training); }
};

}  // namespace

std::vector<int32_t> generate_steered(nn::MuMoEGpt& gpt, const std::vector<int32_t>& prompt, int64_t max_new_tokens,
                                      const SteeringHook& hook, double temperature, int64_t top_k, uint64_t seed,
                                      const nn::TokenProgress& progress) {
  const auto& config = gpt->config();
  EvalGuard mode(*gpt);
  torch::NoGradGuard no_grad;
  // The loop of MuMoEGpt::generate itself, with the steered logits.
  nn::SamplingSettings settings;
  settings.vocab_size = config.vocab_size;
  settings.sampled_vocabulary = gpt->sampled_vocabulary();
  settings.block_size = config.block_size;
  settings.device = gpt->wte()->weight.device();
  settings.max_new_tokens = max_new_tokens;
  settings.temperature = temperature;
  settings.top_k = top_k;
  settings.seed = seed;
  settings.progress = progress;
  return nn::sample_continuation([&](const torch::Tensor& idx) { return steered_logits(gpt, idx, hook); }, prompt,
                                 settings);
}

SteeringResult steer_generation(nn::MuMoEGpt& gpt, const SteeringVector& vector, const SteeringRequest& request,
                                const text::Tokenizer& tokenizer, const nn::TokenProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  if (!std::isfinite(request.alpha)) throw UsageError("alpha must be a finite number");
  const auto prompt = tokenizer.encode(request.prompt.empty() ? std::string("\n") : request.prompt);
  SteeringResult r;
  r.request = request;
  r.vector = vector;
  // Both generations on one progress scale: the steered one continues where the first ended.
  const int64_t total = 2 * request.tokens;
  nn::TokenProgress first, second;
  if (progress) {
    first = [&](int64_t done, int64_t) { return progress(done, total); };
    second = [&](int64_t done, int64_t) { return progress(request.tokens + done, total); };
  }
  r.unsteered_tokens = gpt->generate(prompt, request.tokens, request.temperature, request.top_k, request.seed, first);
  const SteeringHook hook{vector.layer, centre_tensor(vector), request.alpha, request.site};
  r.steered_tokens = generate_steered(gpt, prompt, request.tokens, hook, request.temperature, request.top_k,
                                      request.seed, second);
  r.unsteered = tokenizer.decode(r.unsteered_tokens);
  r.steered = tokenizer.decode(r.steered_tokens);
  for (size_t i = 0; i < r.steered_tokens.size() && i < r.unsteered_tokens.size(); ++i)
    if (r.steered_tokens[i] != r.unsteered_tokens[i]) {
      r.first_difference = static_cast<int64_t>(i);
      break;
    }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace mumoe::analysis
