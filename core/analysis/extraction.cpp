#include "analysis/extraction.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>


#include "analysis/chunked_run.h"
#include "analysis/content_hash.h"
#include "analysis/exact_layer.h"
#include "analysis/tensor_records.h"
#include "cache/cache_repair.h"
#include "io/blas_threads.h"
#include "nn/cpu_team.h"
#include "io/errors.h"
#include "model/manifest.h"
#include "nn/backbone_config.h"
#include "nn/device.h"

namespace mumoe::analysis {
namespace {

// Whether the run's scores come from the float32 arithmetic, certified near argmax ties
// (ExactLayer::certified_scores). Not for a multi-label model: its outputs are decided by their
// logit's sign (RunData::multilabel), which that certificate does not cover.
bool stores_float32_scores(const model::ClassifierModel& model, const ExtractionOptions& options) {
  return !model.is_router() && !model.multilabel() &&
         ExactLayer::certifies_float32_scores(model.layer(), nn::parse_device(options.device));
}

}  // namespace
namespace {

// Which of the two extraction stages computes the parts of a chunk that either may (the input
// side U_inᵀ z̃, the dense modes' checksums, the rows' float32 score bounds; each gives the same
// bits on either thread): the one with time to spare, as measured. The calling thread's gates
// cost I·N per row and the writer's products N·R plus a fixed record and write, so which one
// waits depends on the head and on the host (softmax heads on this project's VM: the calling
// thread at N = 1,024, the writer at N = 128). At each chunk the calling thread looks at how
// long it waited for the writer's previous chunk: not at all — one more part goes to the writer;
// long (> 250 µs) — one part comes back. The level settles where the stages balance, or
// alternates between the two nearest. Fixed levels (ExtractionOptions::writer_share) are for
// tests and benchmarks.
class StageBalance {
 public:
  /// Called as the calling thread starts a chunk: the level of the writer's share. −1: this thread
  /// computes the input side, the checksums and the rows' float32 score bounds; 0: the input
  /// side and the checksums; 1: the input side; 2: none of them.
  int writer_parts() {
    const auto now = Clock::now();
    if (started_) {
      const auto waited = now - last_handed_over_;
      if (waited < std::chrono::microseconds(50))
        parts_ = std::min(parts_ + 1, 2);
      else if (waited > std::chrono::microseconds(250))
        parts_ = std::max(parts_ - 1, -1);
    }
    started_ = true;
    return parts_;
  }
  /// Called as the calling thread hands its chunk over (it then waits for the writer's previous one).
  void handed_over() { last_handed_over_ = Clock::now(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_handed_over_;
  bool started_ = false;
  int parts_ = 0;
};

}  // namespace

std::string data_content_hash(const data::Dataset& data) {
  std::vector<torch::Tensor> content = {data.images, data.features, data.labels, data.attributes};
  if (data.streams_images()) {
    // Streamed images are keyed by their files' names, sizes and times (image_stream.h).
    const auto& listing = data.image_stream->fingerprint();
    content.push_back(torch::from_blob(const_cast<char*>(listing.data()), {static_cast<int64_t>(listing.size())},
                                       torch::kUInt8));
  }
  return hash_tensors(content);
}

cache::RunKey make_run_key(const std::string& model_path, const model::ClassifierModel& model,
                           const data::Dataset& data, const ExtractionOptions& options) {
  cache::RunKey key;
  key.model_hash = hash_file(model_path);
  key.model_path = model_path;
  key.data_identity = data.identity;
  key.data_hash = data_content_hash(data);
  key.layer = model.layer_name();
  auto parameters = nlohmann::json({{"extraction_version", kExtractionVersion},
                                    {"chunk_size", options.chunk_size},
                                    {"layer_dtype", "float64"},
                                    {"gates", "model dtype"}});
  // The same bytes open differently under other choices (a backbone preset, a plain state dict's
  // gate activation, remembered options): the configuration they resolve to is part of the key.
  parameters["layer_config"] = model.layer_config_json();
  // Also how `mumoe cache check` knows that the run's chunks must store their inputs
  // (cache/cache_repair.cpp, run_has_backbone).
  if (model.has_backbone()) parameters["backbone"] = nn::to_json(model.image_classifier()->backbone_config());
  // Scores from the float32 arithmetic (exact_layer.h, certified_scores): a build that stored the
  // float64 arithmetic's, and decides near-ties by that, must not read them as its own.
  if (stores_float32_scores(model, options)) parameters["scores"] = "float32, float64 near ties";
  key.parameters = parameters.dump();
  return key;
}

cache::RunInfo make_run_info(const model::ClassifierModel& model, const data::Dataset& data,
                             const ExtractionOptions& options) {
  if (options.chunk_size <= 0) throw UsageError("the chunk size must be positive");
  cache::RunInfo info;
  info.sample_count = data.size();
  // A router layer's chunks are whole routing groups, so that each chunk routes its samples as
  // every other evaluation of the model does (ClassifierModel::aligned_batch).
  info.chunk_size = model.aligned_batch(options.chunk_size);
  info.input_dim = model.layer_input_dim();
  info.output_dim = model.class_count();
  info.expert_dims = model.expert_dims();
  info.attribute_count = data.attribute_count();
  return info;
}

bool inputs_left_to_data(const model::ClassifierModel& model, const data::Dataset& data) {
  return !model.has_backbone() && data.features.defined();
}

namespace {
std::function<void(torch::Tensor&)>& recomputed_gates_hook() {
  static std::function<void(torch::Tensor&)> hook;
  return hook;
}
}  // namespace

void test_hooks::set_recomputed_gates_hook(std::function<void(torch::Tensor&)> hook) {
  recomputed_gates_hook() = std::move(hook);
}

ChunkCompletion extracted_chunk_completion(const cache::AnalysisCache& cache, int64_t run_id,
                                           const model::ClassifierModel& model, const data::Dataset& data) {
  struct State {
    cache::RunInfo info;
    torch::Tensor features;            // [S, I] float32, what layer_inputs returns, when the layer reads them
    std::optional<ExactLayer> layer;   // made for the first chunk that leaves modes to the model
  };
  auto state = std::make_shared<State>();
  state->info = cache.run_info(run_id);
  if (inputs_left_to_data(model, data)) state->features = data.features.to(torch::kFloat32).contiguous();
  const std::string cache_path = cache.path();
  return [state, &model, cache_path, run_id](cache::ChunkRecord& chunk) {
    const auto& info = state->info;
    const auto where = "run " + std::to_string(run_id) + ", chunk " + std::to_string(chunk.chunk_index);
    const auto damaged = [&](const std::string& problem) {
      return cache::damaged_cache_error(cache_path, where + ": " + problem);
    };
    if (chunk.inputs.empty() && state->features.defined()) {
      // The run's shapes, not the data's, say what the chunk holds (ablation reads inputs by them).
      if (state->features.size(1) != info.input_dim)
        throw damaged("its run has " + std::to_string(info.input_dim) + " inputs per sample, the data's features " +
                      std::to_string(state->features.size(1)));
      if (chunk.first_sample + chunk.count > state->features.size(0))
        throw damaged("samples " + std::to_string(chunk.first_sample) + "+" + std::to_string(chunk.count) +
                      " lie beyond the data's " + std::to_string(state->features.size(0)));
      const float* from = state->features.data_ptr<float>() + chunk.first_sample * info.input_dim;
      chunk.inputs.assign(from, from + chunk.count * info.input_dim);
    }
    if (!chunk.leaves_modes_to_model() || chunk.inputs.empty()) return;
    // A run's shapes as the model has them, or a damaged runs row: then the recomputed rows
    // below could not be the chunk's.
    if (model.is_router() || model.layer_input_dim() != info.input_dim || model.expert_dims() != info.expert_dims)
      throw damaged("leaves coefficients to the model, but the model's layer does not have the run's shapes");
    if (static_cast<int64_t>(chunk.inputs.size()) != chunk.count * info.input_dim)
      throw damaged("holds " + std::to_string(chunk.inputs.size()) + " input values, not " +
                    std::to_string(chunk.count) + " × " + std::to_string(info.input_dim));
    torch::NoGradGuard no_grad;
    if (!state->layer) state->layer.emplace(model.layer(), torch::kCPU);
    const auto rows = torch::from_blob(chunk.inputs.data(), {chunk.count, info.input_dim}, torch::kFloat32);
    const auto coefficients = state->layer->coefficients(rows);
    for (size_t m = 0; m < chunk.left_to_model.size(); ++m) {
      if (!chunk.left_to_model[m]) continue;
      auto values = coefficients.at(m).contiguous();  // [count, N_m]: the shapes were checked above
      if (recomputed_gates_hook()) recomputed_gates_hook()(values);
      if (values_checksum(values) != chunk.left_to_model[m])
        throw StaleCoefficients(cache_path, where + ": the model's gates give other coefficients of expert mode " +
                                                std::to_string(m) + " than those the chunk was extracted with");
      chunk.coefficients[m] = to_sparse_rows(values);  // every entry > 0: full rows, as extraction saw them
    }
    chunk.left_to_model.clear();
  };
}

RunData load_extracted_run(cache::AnalysisCache& cache, int64_t run_id, model::ClassifierModel& model,
                           const data::Dataset& data) {
  try {
    return load_run_data(cache, run_id, extracted_chunk_completion(cache, run_id, model, data));
  } catch (const StaleCoefficients&) {
    // Made by other arithmetic (another machine's BLAS kernels, another build — or this machine,
    // whose BLAS under some kernels and thread counts does not give the same bits for the same
    // product twice, issue 45): a cache miss, not damage. Each chunk whose recomputation
    // disagrees is dropped and extracted again with its coefficients stored, so that reading it
    // no longer depends on reproducing them, and the run read again.
    const auto complete = extracted_chunk_completion(cache, run_id, model, data);
    for (const auto c : cache.chunk_indices(run_id)) {
      cache::ChunkRecord chunk;
      try {
        chunk = cache.get_chunk(run_id, c);
      } catch (const FileError&) {
        continue;  // damage: the second reading below reports it, with the remedy
      }
      if (!chunk.leaves_modes_to_model()) continue;
      try {
        complete(chunk);
      } catch (const StaleCoefficients&) {
        cache.delete_chunk(run_id, c);
      }
    }
    ExtractionOptions options;
    options.chunk_size = cache.run_info(run_id).chunk_size;
    options.store_dense_coefficients = true;
    extract_run(cache, cache.run_key(run_id), model, data, options);
    return load_run_data(cache, run_id, extracted_chunk_completion(cache, run_id, model, data));
  }
}

ExtractionSummary extract_run(cache::AnalysisCache& cache, const cache::RunKey& key, model::ClassifierModel& model,
                              const data::Dataset& data, const ExtractionOptions& options,
                              const ExtractionCallback& progress) {
  model.check_compatible(data);
  const auto info = make_run_info(model, data, options);
  const auto device = nn::parse_device(options.device);
  model.backbone_to(device);
  // The analysed layer on copies: a μMoE layer or block as exact_layer.h evaluates it (the
  // model's gates, float64 expert arithmetic), or a router layer in float64 (which reports one
  // expert mode, its experts' coefficients Σ_j C[t, i, j]).
  std::optional<ExactLayer> layer;
  nn::MoELayer router{nullptr};
  if (model.is_router())
    router = nn::copy_moe_layer(model.router_layer(), torch::kFloat64, device);
  else
    layer.emplace(model.layer(), device);
  torch::NoGradGuard no_grad;
  const bool store_inputs = !inputs_left_to_data(model, data);
  // A dense gate's coefficients (softmax: every entry > 0) are left to the model: the gates give
  // the same bits again from the inputs (exact_layer.h) on this machine's CPU, in a fraction of
  // the time that writing and reading them took (they were most of a softmax head's extraction:
  // 41 MB for 10,000 rows of 1,024 experts). Not from a GPU, whose bits the CPU would not match.
  // Where the recomputation did not give the same bits once, they are stored (options).
  const bool leave_dense_modes = layer.has_value() && device.is_cpu() && !options.store_dense_coefficients;
  // A head on stored features computes little per chunk beside what the writer thread stores
  // (chunked_run.h). On two cores its computation keeps one (this thread's OpenMP team and
  // OpenBLAS's pool, which is process-wide) and the writer the other: OpenBLAS's two threads
  // and the writer took turns, and the gates took 10–15 % longer (2026-11-25, 2 cores;
  // ATen ran one OpenMP thread there anyway). Not measured on more cores, where the writer costs
  // a smaller share: there the pools are left alone. Backbones keep every core.
  const bool one_thread_each = !model.has_backbone() && std::thread::hardware_concurrency() <= 2;
  // Where this thread and the writer have a core each, a μMoE layer's chunk is computed in two
  // stages (chunked_run.h): the gates here, then the expert arithmetic and the record on the
  // writer thread, beside the next chunk's gates. The arithmetic is the float64 one, or for a
  // dense single CP layer (ExactLayer::certifies_float32_scores) the model's own float32 one with
  // its error bounds and float64 rows near a tie (certified_scores) — there the float64
  // arithmetic had been most of what extraction added to the bare forward (+27 % at N = 1,024,
  // +49 % at N = 128; float32: +0 % and +14 %, 2026-11-27). The parts either thread may compute
  // (the input side U_inᵀ z̃, the dense modes' checksums, the score bounds) go to the one with
  // time to spare (StageBalance): the gates are the larger half at N = 1,024, the writer's
  // arithmetic, record and write at N = 128. On this project's 2-core VM the gain of two stages
  // depends on the host: one evening one thread and two measured the same (its two vCPUs then
  // shared one core's units); later, alternating, softmax N = 1,024 took 71–82 ms against
  // 92–134 ms with everything here (docs/BENCHMARKS.md of 2026-11-26, "The float64 arithmetic
  // back on the writer thread", now in its git history). Elsewhere the layer is evaluated here,
  // as before: a backbone's forward pass has every core (the writer's products would contend
  // with its pools), and on more cores OpenBLAS's process-wide pool would be called from both
  // threads at once (not measured).
  const bool arithmetic_on_writer =
      layer.has_value() && device.is_cpu() &&
      (options.arithmetic == ExtractionArithmetic::Auto ? one_thread_each
                                                         : options.arithmetic == ExtractionArithmetic::OnWriter);
  // The pools at one thread as above, also where a test or benchmark puts the arithmetic on the
  // writer on more cores: the two stages then run as they do on two.
  std::optional<nn::AtenTeam> one_team;
  std::optional<io::SingleThreadedBlas> one_blas;
  if (one_thread_each || (arithmetic_on_writer && !model.has_backbone())) {
    one_team.emplace(1);
    one_blas.emplace();
  }
  if (arithmetic_on_writer) layer->float64_layer();  // made before the two threads share the layer
  const bool float32_scores = layer.has_value() && stores_float32_scores(model, options);
  StageBalance balance;  // arithmetic_on_writer: where the input side, checksums and score bounds go
  auto summary = fill_chunked_run_in_two_stages(
      cache, key, info,
      [&](int64_t c) -> FinishChunk {
        const int64_t begin = c * info.chunk_size, end = std::min(info.sample_count, begin + info.chunk_size);
        const auto inputs = model.layer_inputs(data, begin, end);
        const auto rows = inputs.to(device);
        std::vector<torch::Tensor> coefficients;
        torch::Tensor output;  // undefined: computed on the writer thread (from `input_side` or `rows`)
        torch::Tensor input_side;
        std::vector<double> errors;  // float32 score bounds (empty: computed on the writer thread)
        const int writer_parts = !arithmetic_on_writer ? 0
                                 : options.writer_share == ExtractionOptions::kBalancedWriterShare
                                     ? balance.writer_parts()
                                     : options.writer_share;
        if (router.is_empty()) {
          coefficients = layer->coefficients(rows);
          if (!arithmetic_on_writer)
            output = float32_scores ? layer->certified_scores(rows, torch::Tensor(), coefficients)
                                    : layer->output_from_coefficients(rows, coefficients);
          // U_inᵀ z̃ here where that balances the two threads (StageBalance); in float32 where the
          // layer's scores are (ExactLayer::certified_scores).
          else if (writer_parts < 2 && float32_scores)
            input_side = layer->float32_input_side(rows);
          else if (writer_parts < 2 && layer->splits_input_side())
            input_side = layer->input_side(rows);
          if (arithmetic_on_writer && float32_scores && writer_parts < 0)
            errors = layer->float32_score_errors(rows, coefficients);
        } else {
          auto out = router->forward_block(rows.to(torch::kFloat64));
          coefficients = std::move(out.coefficients);
          output = std::move(out.output);
        }
        // Dense modes are told and hashed (a sparse gate's first zero ends the check) beside the
        // gates in two stages where this thread has time to spare (StageBalance); else on the
        // writer thread.
        std::vector<uint64_t> left_to_model;
        const bool checksums_here = leave_dense_modes && arithmetic_on_writer && writer_parts < 1;
        if (checksums_here) left_to_model = dense_mode_checksums(coefficients);
        if (arithmetic_on_writer) balance.handed_over();
        const bool writer_needs_rows = !output.defined() && (!input_side.defined() || float32_scores);
        return [&, c, begin, end, inputs, rows = writer_needs_rows ? rows : torch::Tensor(),
                coefficients = std::move(coefficients), output, input_side, errors = std::move(errors), left_to_model,
                checksums_here]() mutable {
          torch::NoGradGuard no_grad_here;  // grad mode is per thread
          const nn::AtenTeam one_team_here(1);  // beside the other thread's work, always
          if (leave_dense_modes && !checksums_here) left_to_model = dense_mode_checksums(coefficients);
          if (!output.defined() && float32_scores)
            output = layer->certified_scores(rows, input_side, coefficients, std::move(errors));
          else if (!output.defined())  // the same bits either way (ExactLayer::splits_input_side)
            output = input_side.defined() ? layer->output_from_input_side(input_side, coefficients)
                                          : layer->output_from_coefficients(rows, coefficients);
          const auto scores = output.to(torch::kCPU, torch::kFloat64).contiguous();
          const auto* value = scores.data_ptr<double>();
          if (!std::all_of(value, value + scores.numel(), [](double v) { return std::isfinite(v); }))
            throw FileError(key.model_path, "layer '" + key.layer + "' produced NaN or infinite outputs on samples " +
                                                std::to_string(begin) + "–" + std::to_string(end - 1) + " of " +
                                                data.identity);
          std::vector<torch::Tensor> on_cpu;
          for (const auto& a : coefficients) on_cpu.push_back(a.cpu());
          const auto attributes = data.attributes.defined() ? data.attributes.slice(0, begin, end) : torch::Tensor();
          return make_chunk_record(c, begin, store_inputs ? inputs : torch::Tensor(), data.labels.slice(0, begin, end),
                                   scores, on_cpu, attributes, left_to_model);
        };
      },
      progress, options.batching);
  summary.arithmetic_on_writer = arithmetic_on_writer;
  return summary;
}

}  // namespace mumoe::analysis
