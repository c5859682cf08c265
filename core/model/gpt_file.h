// Model files of the "mumoe-gpt" architecture (a nanoGPT with μMoE MLP blocks, nn/mumoe_gpt.h),
// and plain nanoGPT-μMoE state dicts saved from PyTorch.
//
// A mumoe-gpt file holds the full nanoGPT state dict (lm_head.weight included, equal to
// transformer.wte.weight) and a manifest whose architecture_config is
// {"gpt": GptConfig, "tokenizer": NAME} and whose layers are the MLP blocks
// "transformer.h.{i}.mlp.MuMoE_layer", so `mumoe info`, `--layer` and the analysis engine see
// every block as an ordinary μMoE layer. A GPT with router MLPs (nn::GptConfig::router_mlp) lists
// them as router layers "transformer.h.{i}.mlp" with their configuration, and its "gpt" json is
// marked {"mlp": "router"}.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/model_file.h"
#include "nn/mumoe_gpt.h"
#include "text/tokenizer.h"

namespace mumoe::model {

inline constexpr const char* kGptArchitecture = "mumoe-gpt";
/// The state-dict key of the output projection, tied to transformer.wte.weight.
inline constexpr const char* kLmHeadKey = "lm_head.weight";
inline constexpr const char* kTokenEmbeddingKey = "transformer.wte.weight";

/// The model's nanoGPT state dict as PyTorch writes it: every parameter and buffer under its
/// module key, then lm_head.weight (the same tensor as transformer.wte.weight).
std::vector<io::NamedTensor> gpt_state_dict(const nn::MuMoEGpt& gpt);

/// The manifest describing `gpt`: one layer per MLP block, named after its key prefix
/// ("transformer.h.0.mlp.MuMoE_layer"); `tokenizer` names the tokenizer the model was trained
/// with ("byte", or e.g. "gpt2-bpe:DIR"), for the commands that turn text into tokens.
Manifest gpt_manifest(const nn::MuMoEGpt& gpt, nlohmann::json provenance,
                      const std::string& tokenizer = "byte");

/// Writes gpt_state_dict(gpt) with `manifest`, atomically.
void save_gpt(const std::string& path, const nn::MuMoEGpt& gpt, const Manifest& manifest,
              const io::WriteProgress& progress = {});

/// Builds the GPT stored in `file` (eval mode, CPU, float32). A "mumoe-gpt" file is built from
/// its manifest; a plain state dict (file.inferred()) goes through load_gpt_state_dict with
/// `n_head`. Throws FileError for any other architecture or tensors that do not fit.
nn::MuMoEGpt load_gpt(const ModelFile& file, int64_t n_head = 0);

/// The head count assumed for a plain state dict when none is given: GPT-2's head width of 64,
/// i.e. round(n_embd / 64), at least 1, lowered until it divides n_embd.
int64_t default_head_count(int64_t n_embd);

/// The GptConfig of a plain nanoGPT-μMoE state dict (keys as in gpt_state_dict, "module." /
/// "_orig_mod." prefixes allowed), from shapes: V and C from transformer.wte.weight (or
/// lm_head.weight when only that one was saved), block_size from transformer.wpe.weight,
/// n_layer from the transformer.h.{i} blocks, experts / ranks / gate activation from the μMoE
/// layers ModelFile inferred (they must all be the reference's MLP block C → 4C → C with
/// LayerNorm gating and input LayerNorm). The head count cannot be seen in any shape: `n_head`
/// > 0 is used as given, 0 means the checkpoint's model_args.n_head (nanoGPT's ckpt.pt) or else
/// default_head_count(C); model_args that disagree with the shapes are a FileError. A wrong head count loads without error
/// but computes a different attention, so pass the one the model was trained with. dropout
/// keeps GptConfig's default (it does not affect inference). Throws FileError.
nn::GptConfig infer_gpt_config(const ModelFile& file, int64_t n_head = 0);

/// nanoGPT's "model_args" saved beside the weights in ckpt.pt (n_layer, n_head, n_embd,
/// block_size, bias, vocab_size, dropout, layer_type, n_experts), or an empty object.
nlohmann::json nanogpt_model_args(const ModelFile& file);

/// Where a GPT's head count comes from, for `info` and the Model page: its manifest, the
/// caller (--heads), the checkpoint's model_args, or the GPT-2 guess of a head width of 64
/// (which the user is told about: a wrong count computes another attention without error).
enum class HeadCountSource { Manifest, Given, ModelArgs, Guessed };
HeadCountSource gpt_head_count_source(const ModelFile& file, int64_t n_head = 0);

/// The name of the tokenizer that turns text into the GPT's tokens: `choice` (--tokenizer) when
/// given, else the one its manifest names, else the one its vocabulary implies
/// (text::tokenizer_for_vocabulary: 256 → byte, GPT-2's 50,257…50,304 → gpt2). Throws
/// UsageError asking for --tokenizer when none of these says.
std::string gpt_tokenizer_name(const ModelFile& file, int64_t vocab_size, const std::string& choice = "");

/// That tokenizer, loaded (text::make_tokenizer); refused when it has more tokens than the
/// model's embedding has rows.
std::shared_ptr<const text::Tokenizer> open_gpt_tokenizer(const ModelFile& file, int64_t vocab_size,
                                                          const std::string& choice = "");

/// Builds the GPT of a plain state dict: infer_gpt_config + load_gpt_weights (eval mode, CPU).
nn::MuMoEGpt load_gpt_state_dict(const ModelFile& file, int64_t n_head = 0);

/// Copies the file's tensors into `gpt` (which must have the file's shapes). lm_head.weight and
/// transformer.wte.weight may both be present (then they must be equal: the model ties them) or
/// either one alone. The causal-mask buffers "transformer.h.{i}.attn.bias" that nanoGPT keeps
/// under PyTorch < 2.0 are ignored; any other tensor the model does not have is an error, as is
/// a missing or mis-shaped one, a non-float parameter and a NaN/inf value.
void load_gpt_weights(const ModelFile& file, nn::MuMoEGpt& gpt);

}  // namespace mumoe::model
