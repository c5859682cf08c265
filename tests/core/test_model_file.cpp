// Model files: the manifest round trip, and plain state_dicts in the reference implementation's
// layouts (spec §2) — keys spelled out literally here, as PyTorch would write them — loading
// with the right inferred configuration and the right forward.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "io/errors.h"
#include "io/safetensors.h"
#include "model/model_file.h"
#include "model/model_summary.h"
#include "reference_math.h"
#include "temp_dir.h"

using namespace mumoe;
using mumoe::testkit::TempDir;

namespace {

using Tensors = std::vector<io::NamedTensor>;

torch::Tensor rnd(std::vector<int64_t> shape) { return torch::randn(shape); }

// CP, hierarchy 1, BatchNorm gating, I=6, N=5, R=3, O=4, with bias: as MuMoE(...).state_dict().
Tensors reference_cp_bn(const std::string& prefix) {
  return {{prefix + "projs.0", rnd({6, 5})},
          {prefix + "bn.0.running_mean", rnd({5}) * 0.1},
          {prefix + "bn.0.running_var", torch::rand({5}) + 0.5},
          {prefix + "bn.0.num_batches_tracked", torch::tensor(int64_t{1234})},
          {prefix + "MuMoE.factors.0", rnd({5, 3})},
          {prefix + "MuMoE.factors.1", rnd({7, 3})},
          {prefix + "MuMoE.factors.2", rnd({4, 3})}};
}

// The loaded block's forward must be the materialised-tensor forward of the file's tensors.
void expect_forward_matches_reference(const model::ModelFile& file, const std::string& layer) {
  auto block = file.build_layer(layer, torch::kFloat64);
  auto x = torch::randn({7, block->config().input_dim}, torch::kFloat64);
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> coeffs;
  auto ref = testkit::reference_block(block, x, coeffs);
  EXPECT_LE(testkit::relative_error(block->forward(x).output, ref), 1e-10);
}

TEST(ModelFile, InfersCPWithBatchNormFromAPlainStateDict) {
  TempDir dir;
  const auto path = dir.file("cp.safetensors");
  torch::manual_seed(0);
  const auto tensors = reference_cp_bn("");
  io::write_safetensors(path, tensors);
  auto file = model::ModelFile::load(path);
  EXPECT_TRUE(file.inferred());
  const auto& layer = file.single_layer();
  const auto& c = layer.config;
  EXPECT_EQ(layer.name, "mumoe");
  EXPECT_EQ(c.factorization, nn::Factorization::CP);
  EXPECT_EQ(c.input_dim, 6);
  EXPECT_EQ(c.output_dim, 4);
  EXPECT_EQ(c.expert_dims, std::vector<int64_t>{5});
  EXPECT_EQ(c.cp_rank, 3);
  EXPECT_TRUE(c.use_bias);
  EXPECT_EQ(c.gate_norm, nn::GateNorm::BatchNorm);
  EXPECT_FALSE(c.is_block());
  expect_forward_matches_reference(file, "mumoe");
  // The weights are the file's, not a fresh initialisation.
  auto block = file.build_layer("mumoe");
  EXPECT_TRUE(torch::equal(block->named_parameters()["MuMoE.factors.1"], tensors[5].tensor));
  EXPECT_TRUE(torch::equal(block->named_buffers()["bn.0.running_var"], tensors[2].tensor));
}

TEST(ModelFile, StripsDataParallelAndCompilePrefixes) {
  TempDir dir;
  const auto path = dir.file("wrapped.safetensors");
  io::write_safetensors(path, reference_cp_bn("module._orig_mod."));
  auto file = model::ModelFile::load(path);
  EXPECT_EQ(file.single_layer().prefix, "");
  expect_forward_matches_reference(file, "mumoe");
}

TEST(ModelFile, LoadsThePreReleaseTopLevelLayout) {
  TempDir dir;
  const auto path = dir.file("mmoe.safetensors");
  // MMoE stored factors.* at top level, TR hierarchy 2 here: cores [R1,N1,R2] [R2,N2,R3] [R3,I+1,R4] [R4,O,R1].
  io::write_safetensors(path, {{"projs.0", rnd({6, 4})},
                               {"projs.1", rnd({6, 3})},
                               {"bn.0.running_mean", rnd({4})},
                               {"bn.0.running_var", torch::rand({4}) + 0.5},
                               {"bn.1.running_mean", rnd({3})},
                               {"bn.1.running_var", torch::rand({3}) + 0.5},
                               {"factors.0", rnd({2, 4, 3})},
                               {"factors.1", rnd({3, 3, 2})},
                               {"factors.2", rnd({2, 7, 4})},
                               {"factors.3", rnd({4, 5, 2})}});
  auto file = model::ModelFile::load(path);
  const auto& c = file.single_layer().config;
  EXPECT_TRUE(file.single_layer().legacy_factor_keys);
  EXPECT_EQ(c.factorization, nn::Factorization::TR);
  EXPECT_EQ(c.expert_dims, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(c.tr_ranks, (std::vector<int64_t>{2, 3, 2, 4}));
  EXPECT_EQ(c.output_dim, 5);
  expect_forward_matches_reference(file, "mumoe");
}

TEST(ModelFile, InfersTwoLayerBlocksWithLayerNormGatingInAGPTLayout) {
  TempDir dir;
  const auto path = dir.file("gpt.safetensors");
  Tensors tensors = {{"transformer.wte.weight", rnd({50, 8})}};  // not a μMoE layer: ignored
  for (int i = 0; i < 2; ++i) {
    const std::string p = "_orig_mod.transformer.h." + std::to_string(i) + ".mlp.MuMoE_layer.";
    // n_embd 8 → 4·n_embd 32 → n_embd 8; LayerNorm gating (no buffers); input LayerNorm.
    tensors.push_back({p + "projs.0", rnd({8, 6})});
    tensors.push_back({p + "input_ln.weight", rnd({8})});
    tensors.push_back({p + "input_ln.bias", rnd({8})});
    tensors.push_back({p + "MuMoE.factors.0", rnd({6, 5})});
    tensors.push_back({p + "MuMoE.factors.1", rnd({9, 5})});
    tensors.push_back({p + "MuMoE.factors.2", rnd({32, 5})});
    tensors.push_back({p + "MuMoE2.factors.0", rnd({6, 5})});
    tensors.push_back({p + "MuMoE2.factors.1", rnd({33, 5})});
    tensors.push_back({p + "MuMoE2.factors.2", rnd({8, 5})});
  }
  io::write_safetensors(path, tensors);
  auto file = model::ModelFile::load(path);
  ASSERT_EQ(file.manifest().layers.size(), 2u);
  const auto& layer = file.layer("transformer.h.1.mlp.MuMoE_layer");
  EXPECT_EQ(layer.config.gate_norm, nn::GateNorm::LayerNorm);
  EXPECT_TRUE(layer.config.input_layer_norm);
  EXPECT_EQ(layer.config.output_dim, 32);
  EXPECT_EQ(layer.config.second_dim, 8);
  EXPECT_THROW(file.single_layer(), UsageError);  // two layers: the caller must choose
  expect_forward_matches_reference(file, "transformer.h.0.mlp.MuMoE_layer");
  expect_forward_matches_reference(file, "transformer.h.1.mlp.MuMoE_layer");
}

TEST(ModelFile, OverridesWhatCannotBeInferred) {
  TempDir dir;
  const auto path = dir.file("ln.safetensors");
  io::write_safetensors(path, {{"projs.0", rnd({6, 5})},
                               {"MuMoE.factors.0", rnd({5, 3})},
                               {"MuMoE.factors.1", rnd({6, 3})},
                               {"MuMoE.factors.2", rnd({4, 3})}});
  model::LayoutOverrides o;
  o.gate_activation = nn::GateActivationKind::Softmax;
  o.gate_norm_without_bn = nn::GateNorm::None;
  o.label_names = {"a", "b", "c", "d"};
  auto file = model::ModelFile::load(path, o);
  const auto& c = file.single_layer().config;
  EXPECT_FALSE(c.use_bias);  // 6 input rows for I = 6
  EXPECT_EQ(c.gate_activation, nn::GateActivationKind::Softmax);
  EXPECT_EQ(c.gate_norm, nn::GateNorm::None);
  EXPECT_EQ(file.manifest().label_names, o.label_names);
  expect_forward_matches_reference(file, "mumoe");
}

TEST(ModelFile, ManifestRoundTripPreservesEverything) {
  TempDir dir;
  const auto path = dir.file("own.safetensors");
  nn::LayerConfig c;
  c.factorization = nn::Factorization::TR;
  c.input_dim = 6;
  c.output_dim = 5;
  c.expert_dims = {4, 2};
  c.tr_ranks = {1, 2, 3, 2};
  c.second_dim = 3;
  c.gate_activation = nn::GateActivationKind::Softmax;
  nn::MuMoEBlock block(c);
  testkit::randomize(block, 9);
  model::Manifest m;
  m.layers = {{"head", "head.", c, false, std::nullopt}};
  m.label_names = {"x", "y", "z"};
  m.attribute_names = {"Young", "Male"};
  m.provenance = {{"command", "mumoe train --seed 3"}, {"accuracy", 0.91}};
  model::save_model_file(path, m, model::layer_tensors(m.layers[0], block));

  auto file = model::ModelFile::load(path);
  EXPECT_FALSE(file.inferred());
  EXPECT_EQ(model::to_json(file.manifest()), model::to_json(m));
  auto loaded = file.build_layer("head");
  block->eval();
  auto x = torch::randn({5, 6});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(loaded->forward(x).output, block->forward(x).output));
  // And the summary agrees with the configuration.
  const auto summary = model::summarize_model_file(path);
  ASSERT_EQ(summary.layers.size(), 1u);
  EXPECT_EQ(summary.layers[0].config.variant_name(), "TT");
  EXPECT_EQ(summary.total_parameters(), nn::count_parameters(c).total());
}

// ---- invalid checkpoints: each is rejected with a message naming the file and the problem ----

void expect_load_error(const Tensors& tensors, const std::string& phrase,
                       const std::map<std::string, std::string>& metadata = {}, bool build = false) {
  TempDir dir;
  const auto path = dir.file("bad.safetensors");
  io::write_safetensors(path, tensors, metadata);
  try {
    auto file = model::ModelFile::load(path);
    if (build) file.build_layer(file.single_layer().name);
    FAIL() << "expected an error containing '" << phrase << "'";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

TEST(ModelFileErrors, NoMuMoELayer) { expect_load_error({{"weight", rnd({3, 3})}}, "no μMoE layer found"); }

TEST(ModelFileErrors, MissingFactors) {
  expect_load_error({{"projs.0", rnd({6, 5})}}, "no factors");
}

TEST(ModelFileErrors, WrongNumberOfFactors) {
  expect_load_error({{"projs.0", rnd({6, 5})}, {"MuMoE.factors.0", rnd({5, 3})}, {"MuMoE.factors.1", rnd({7, 3})}},
                    "need 3 factors");
}

TEST(ModelFileErrors, ExpertCountDisagreesWithGating) {
  auto t = reference_cp_bn("");
  t[4].tensor = rnd({9, 3});
  expect_load_error(t, "has 9 experts but projs.0 has 5");
}

TEST(ModelFileErrors, InputRowsFitNeitherIWithNorWithoutBias) {
  auto t = reference_cp_bn("");
  t[5].tensor = rnd({11, 3});
  expect_load_error(t, "11 input rows");
}

TEST(ModelFileErrors, TuckerIsRejectedByName) {
  auto t = reference_cp_bn("");
  t.push_back({"MuMoE.core", rnd({3, 3, 3})});
  expect_load_error(t, "Tucker");
}

TEST(ModelFileErrors, BrokenTensorRing) {
  expect_load_error({{"projs.0", rnd({6, 4})},
                     {"MuMoE.factors.0", rnd({2, 4, 3})},
                     {"MuMoE.factors.1", rnd({2, 7, 2})},
                     {"MuMoE.factors.2", rnd({2, 5, 2})}},
                    "does not chain");
}

TEST(ModelFileErrors, NaNInAParameterIsNamedWhenBuilding) {
  auto t = reference_cp_bn("");
  t[6].tensor[1][2] = std::numeric_limits<float>::quiet_NaN();
  expect_load_error(t, "tensor 'MuMoE.factors.2' contains NaN", {}, /*build=*/true);
}

TEST(ModelFileErrors, NonFloatParameterIsRejectedByDtype) {
  auto t = reference_cp_bn("");
  t[4].tensor = torch::ones({5, 3}, torch::kInt64);
  expect_load_error(t, "has dtype I64; parameters must be F32, F64, F16 or BF16", {}, /*build=*/true);
}

TEST(ModelFileErrors, ManifestThatIsNotJSON) {
  expect_load_error(reference_cp_bn(""), "manifest is not valid JSON", {{"mumoe.manifest", "{oops"}});
}

TEST(ModelFileErrors, ManifestFromANewerFormat) {
  expect_load_error(reference_cp_bn(""), "format_version 99 is not supported",
                    {{"mumoe.manifest", R"({"format":"mumoe-studio-model","format_version":99,"architecture":"x","layers":[]})"}});
}

TEST(ModelFileErrors, ManifestLayerWithoutItsTensors) {
  nn::LayerConfig c;
  c.input_dim = 6;
  c.output_dim = 4;
  c.expert_dims = {5};
  c.cp_rank = 3;
  model::Manifest m;
  m.layers = {{"head", "head.", c, false, std::nullopt}};
  expect_load_error(reference_cp_bn(""), "layer 'head': tensor 'head.",
                    {{"mumoe.manifest", model::to_json(m).dump()}});
}

TEST(ModelFileErrors, ManifestWithAWrongFieldType) {
  expect_load_error(reference_cp_bn(""), "layers",
                    {{"mumoe.manifest", R"({"format":"mumoe-studio-model","format_version":1,"architecture":"x","layers":3})"}});
}

}  // namespace
