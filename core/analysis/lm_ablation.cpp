#include "analysis/lm_ablation.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <set>

#include "analysis/ablation_metrics.h"
#include "nn/expert_slices.h"
#include "analysis/lm_forward.h"
#include "io/errors.h"
#include "nn/device.h"
#include "text/byte_tokenizer.h"

namespace mumoe::analysis {
namespace {

// Sequences per forward batch: the baseline, the naive passes and the sparse re-runs. The naive
// passes use exactly the baseline's batches, so their unaffected logits are bit-identical. At most
// 16, and few enough that a batch's float64 logits stay under 256 MB: GPT-2's are 412 MB a
// 1,024-token sequence, so 16 at once (and their log-softmax) would need 13 GB.
int64_t sequences_per_batch(int64_t block_size, int64_t vocab_size) {
  constexpr int64_t kLogitBudget = int64_t{256} << 20;
  const int64_t sequence_bytes = std::max<int64_t>(1, block_size * vocab_size * static_cast<int64_t>(sizeof(double)));
  return std::clamp<int64_t>(kLogitBudget / sequence_bytes, 1, 16);
}

std::vector<int64_t> to_longs(const torch::Tensor& t) {
  const auto c = t.to(torch::kCPU, torch::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}
std::vector<double> to_doubles(const torch::Tensor& t) {
  const auto c = t.to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}
double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

LmAblation::LmAblation(const nn::MuMoEGpt& gpt, const LmEvalSet& set, int64_t layer, const std::string& device,
                       const SweepCallback& progress)
    : set_(set), layer_(layer), device_(nn::parse_device(device)) {
  if (layer < 0 || layer >= gpt->n_layer())
    throw UsageError("layer " + std::to_string(layer) + " does not exist: the GPT has layers 0–" +
                     std::to_string(gpt->n_layer() - 1));
  if (set.block_size > gpt->config().block_size)
    throw UsageError("the evaluation sequences (" + std::to_string(set.block_size) +
                     " tokens) are longer than the GPT's context (" + std::to_string(gpt->config().block_size) + ")");
  experts_ = gpt->config().experts;
  sequences_per_batch_ = sequences_per_batch(set.block_size, gpt->config().vocab_size);
  gpt_ = copy_gpt(gpt, torch::kFloat64, device_);
  torch::NoGradGuard no_grad;

  std::vector<torch::Tensor> h, x, a;
  for (int64_t begin = 0; begin < set.sequences; begin += sequences_per_batch_) {
    const int64_t end = std::min(set.sequences, begin + sequences_per_batch_);
    const auto pass = forward_at_layer(gpt_, sequence_ids(begin, end), layer);
    h.push_back(pass.mlp_input);
    x.push_back(pass.block_output);
    a.push_back(pass.coefficients);
    const auto p = to_longs(pass.logits.argmax(-1).reshape({-1}));
    const auto l = to_doubles(token_losses(pass.logits, sequence_targets(begin, end)));
    predictions_.insert(predictions_.end(), p.begin(), p.end());
    losses_.insert(losses_.end(), l.begin(), l.end());
    if (progress && !progress(end, set.sequences)) throw Cancelled();
  }
  mlp_input_ = torch::cat(h);
  block_output_ = torch::cat(x);
  coefficients_ = torch::cat(a);

  // Classes: the target tokens that occur, ascending.
  const int64_t vocab = gpt->config().vocab_size;
  std::vector<int64_t> seen(vocab, 0);
  for (int64_t k = 0; k < set.tokens(); ++k) ++seen.at(set.target(k));
  class_of_token_.assign(vocab, -1);
  const text::ByteTokenizer bytes;
  const text::Tokenizer& tokenizer = set.tokenizer ? *set.tokenizer : bytes;
  for (int64_t v = 0; v < vocab; ++v)
    if (seen[v]) {
      class_of_token_[v] = static_cast<int64_t>(baseline_.class_tokens.size());
      baseline_.class_tokens.push_back(static_cast<int32_t>(v));
      baseline_.class_names.push_back(v < tokenizer.vocab_size() ? tokenizer.token_text(static_cast<int32_t>(v))
                                                                 : std::to_string(v));
    }
  for (int64_t k = 0; k < set.tokens(); ++k) labels_.push_back(class_of_token_[set.target(k)]);
  std::vector<int64_t> predicted_classes;
  for (auto p : predictions_) predicted_classes.push_back(class_of_token_[p]);
  baseline_.before = class_accuracy(labels_, predicted_classes, static_cast<int64_t>(baseline_.class_tokens.size()));
  baseline_.loss_before = mean(losses_);
  baseline_.tokens = set.tokens();
  baseline_.sequences = set.sequences;
}

torch::Tensor LmAblation::sequence_ids(int64_t begin, int64_t end) const {
  const int64_t t = set_.block_size;
  std::vector<int64_t> ids(set_.stream.begin() + begin * t, set_.stream.begin() + end * t);
  return torch::tensor(ids, torch::kLong).view({end - begin, t}).to(device_);
}

torch::Tensor LmAblation::sequence_targets(int64_t begin, int64_t end) const {
  const int64_t t = set_.block_size;
  std::vector<int64_t> ids(set_.stream.begin() + begin * t + 1, set_.stream.begin() + end * t + 1);
  return torch::tensor(ids, torch::kLong).view({end - begin, t}).to(device_);
}

torch::Tensor LmAblation::coefficients() const { return coefficients_.reshape({-1, experts_}).cpu(); }

void LmAblation::check(const std::vector<int64_t>& experts) const {
  if (experts.empty()) throw UsageError("no experts to ablate");
  require_distinct_experts(experts);
  for (auto n : experts)
    if (n < 0 || n >= experts_)
      throw UsageError("cannot ablate expert " + std::to_string(n) + ": layer " + std::to_string(layer_) +
                       " has experts 0–" + std::to_string(experts_ - 1));
}

torch::Tensor LmAblation::token_mask(const std::vector<int64_t>& experts) const {
  const auto index = torch::tensor(experts, torch::kLong).to(device_);
  return (coefficients_.index_select(2, index) > 0).any(2);
}

std::vector<int64_t> LmAblation::affected_sequences(const std::vector<int64_t>& experts) const {
  check(experts);
  return to_longs(token_mask(experts).any(1).nonzero().reshape({-1}));
}

LmAblation::After LmAblation::after_sparse(const std::vector<int64_t>& experts) {
  torch::NoGradGuard no_grad;
  After out{predictions_, losses_};
  const auto removed = torch::tensor(experts, torch::kLong).to(device_);
  const int64_t t = set_.block_size;
  auto block = gpt_->block(layer_);
  const bool router = block->has_router_mlp();
  auto mlp = block->mlp();
  // Block L's new output at the tokens in `mask` of the given rows: h + mlp(h) with a_n := 0.
  auto ablated_rows = [&](const torch::Tensor& h, const torch::Tensor& a) {
    return h + mlp->output_from_coefficients(h, {a.index_fill(1, removed, 0.0)});
  };
  const auto mask = token_mask(experts);  // [S, T]

  // A router MLP is called on whole sequences (its buffers are shared by a sequence's tokens: a
  // token passed alone would be routed as a group of one), so its new output is computed
  // sequence by sequence, below, even for the last block; the routing itself does not change.
  if (!router && layer_ + 1 == gpt_->n_layer()) {
    // Only ln_f and lm_head follow: per token, so only the affected tokens are re-run.
    const auto tokens = mask.reshape({-1}).nonzero().reshape({-1});
    if (tokens.numel() == 0) return out;
    const auto h = mlp_input_.reshape({-1, mlp_input_.size(2)}).index_select(0, tokens);
    const auto a = coefficients_.reshape({-1, experts_}).index_select(0, tokens);
    std::vector<int64_t> targets;
    const auto list = to_longs(tokens);
    for (auto k : list) targets.push_back(set_.target(k));
    // Every affected token of the set at once: their logits in pieces (a GPT-2's 8,192 tokens
    // would be 3.3 GB of float64 logits whole).
    const auto outcomes = next_token_outcomes(gpt_, ablated_rows(h, a), torch::tensor(targets, torch::kLong));
    const auto p = to_longs(outcomes.predictions);
    const auto l = to_doubles(outcomes.losses);
    for (size_t i = 0; i < list.size(); ++i) {
      out.predictions[list[i]] = p[i];
      out.losses[list[i]] = l[i];
    }
    return out;
  }

  const auto sequences = to_longs(mask.any(1).nonzero().reshape({-1}));
  const auto batch = static_cast<size_t>(sequences_per_batch_);
  for (size_t begin = 0; begin < sequences.size(); begin += batch) {
    const std::vector<int64_t> part(sequences.begin() + begin,
                                    sequences.begin() + std::min(sequences.size(), begin + batch));
    const auto rows = torch::tensor(part, torch::kLong).to(device_);
    auto x = block_output_.index_select(0, rows).clone();  // [B, T, C]; unaffected tokens keep x_{L+1}
    const auto m = mask.index_select(0, rows);
    if (router) {
      // Removing experts does not change the routing (it reads the affinities, not the experts'
      // outputs): the sequences' MLP re-run with the experts' combine weights at 0.
      const auto ablated = block->mlp_residual(mlp_input_.index_select(0, rows), nn::ExpertAblation::first_mode(experts));
      x.index_put_({m}, ablated.output.index({m}));
    } else {
      const auto h = mlp_input_.index_select(0, rows).index({m});     // [M, C]
      const auto a = coefficients_.index_select(0, rows).index({m});  // [M, N]
      x.index_put_({m}, ablated_rows(h, a));
    }
    const auto logits = forward_from_block(gpt_, x, layer_ + 1);
    std::vector<int64_t> targets;
    for (auto s : part)
      for (int64_t i = 0; i < t; ++i) targets.push_back(set_.target(s * t + i));
    const auto p = to_longs(logits.argmax(-1).reshape({-1}));
    const auto l = to_doubles(token_losses(logits, torch::tensor(targets, torch::kLong)));
    for (size_t b = 0; b < part.size(); ++b)
      for (int64_t i = 0; i < t; ++i) {
        out.predictions[part[b] * t + i] = p[b * t + i];
        out.losses[part[b] * t + i] = l[b * t + i];
      }
  }
  return out;
}

LmAblation::After LmAblation::after_naive(const std::vector<int64_t>& experts) {
  torch::NoGradGuard no_grad;
  // W_n := 0, literally: expert n's factor slices in both layers of a μMoE block, or a router
  // MLP's expert n's output layer (expert_slices.h).
  auto gpt_block = gpt_->block(layer_);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> saved;  // (slice view, original values)
  for (auto& slice : gpt_block->has_router_mlp() ? nn::expert_slices(gpt_block->router_mlp(), experts)
                                                  : nn::expert_slices(gpt_block->mlp(), experts)) {
    saved.emplace_back(slice, slice.clone());
    slice.zero_();
  }
  auto restore = [&] {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) it->first.copy_(it->second);
  };
  After out;
  try {
    for (int64_t begin = 0; begin < set_.sequences; begin += sequences_per_batch_) {
      const int64_t end = std::min(set_.sequences, begin + sequences_per_batch_);
      const auto logits = gpt_->forward(sequence_ids(begin, end)).logits;
      const auto p = to_longs(logits.argmax(-1).reshape({-1}));
      const auto l = to_doubles(token_losses(logits, sequence_targets(begin, end)));
      out.predictions.insert(out.predictions.end(), p.begin(), p.end());
      out.losses.insert(out.losses.end(), l.begin(), l.end());
    }
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return out;
}

LmAblation::After LmAblation::after(const std::vector<int64_t>& experts, AblationMethod method) {
  check(experts);
  return method == AblationMethod::Naive ? after_naive(experts) : after_sparse(experts);
}

LmAblationOutcome LmAblation::outcome(const std::vector<int64_t>& experts, const After& after) const {
  LmAblationOutcome o;
  o.outcome.mode = 0;
  o.outcome.experts = experts;
  std::vector<int64_t> predicted_classes;
  for (auto p : after.predictions) predicted_classes.push_back(class_of_token_[p]);
  o.outcome.after =
      class_accuracy(labels_, predicted_classes, static_cast<int64_t>(baseline_.class_tokens.size()));
  o.outcome.drop = accuracy_drop(baseline_.before, o.outcome.after);
  o.outcome.polysemanticity = polysemanticity(o.outcome.drop);
  o.outcome.has_effect = has_effect(o.outcome.drop);
  const auto mask = token_mask(experts);
  o.outcome.affected_samples = mask.sum().item<int64_t>();
  o.affected_sequences = mask.any(1).sum().item<int64_t>();
  for (size_t k = 0; k < after.predictions.size(); ++k)
    o.outcome.changed_predictions += after.predictions[k] != predictions_[k];
  o.loss_after = mean(after.losses);
  return o;
}

LmAblationReport LmAblation::ablate(const std::vector<int64_t>& experts, AblationMethod method) {
  const auto start = std::chrono::steady_clock::now();
  LmAblationReport r;
  r.layer = layer_;
  r.method = method;
  r.baseline = baseline_;
  r.experts.push_back(outcome(experts, after(experts, method)));
  summarise(r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

LmAblationReport LmAblation::sweep(AblationMethod method, const SweepCallback& progress, ExpertRange experts) {
  const auto start = std::chrono::steady_clock::now();
  const auto range = experts.within(experts_);
  LmAblationReport r;
  r.layer = layer_;
  r.method = method;
  r.baseline = baseline_;
  for (int64_t n = range.begin; n < range.end; ++n) {
    r.experts.push_back(outcome({n}, after({n}, method)));
    if (progress && !progress(n + 1 - range.begin, range.end - range.begin)) throw Cancelled();
  }
  summarise(r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace mumoe::analysis
