// The μMoE reference's MLP-Mixer against real PyTorch: the test's Python
// (tests/support/reference_models.py: Mixer, transcribed from experiments/mlp_mixer.py with its
// module names — block 0 mixes with the script's `--layer MLP` baseline, block 1 with μMoE blocks
// in the reference key layout) saves the randomised model as the script does after accelerate
// (torch.save(model.state_dict()) with DDP's "module." prefix), writes PNGs and computes, through
// PIL and torchvision's transform, the logits, every μMoE layer's coefficients and the
// predictions with each expert removed (a_n := 0, i.e. W_n := 0). The app opens the .pth from
// names and shapes alone and must match: values to 1e-5, ablated predictions exactly, with both
// of the block analysis's methods.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/layer_analysis.h"
#include "analysis/vit_block_analysis.h"
#include "cli_runner.h"
#include "data/dataset.h"
#include "io/errors.h"
#include "io/safetensors.h"
#include "model/classifier_file.h"
#include "model/classifier_model.h"
#include "model/model_file.h"
#include "model/model_summary.h"
#include "python_fixture.h"
#include "python_reference.h"
#include "temp_dir.h"

using namespace mumoe;
using testkit::expect_close;
using testkit::read_expected;
using testkit::run_python;
using testkit::TempDir;

namespace mlp_mixer_test {

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const auto c = t.to(torch::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// BLOCKS: the blocks that mix with μMoE blocks (the rest with plain MLPs).
constexpr const char* kFixture = R"py(
torch.manual_seed(0)
model = mixer(BLOCKS, KIND)
torch.save({"module." + k: v for k, v in model.state_dict().items()}, "mixer.pth")
# 36 px: the transform's resize (to 36) is then the identity. PIL rounds a resized image to 8
# bits, the app keeps it in float: resizing is compared elsewhere, not to 1e-5.
write_images("img", (36, 36), 12, 7)
x = load_images("img", mixer_transform())
out = {}
with torch.no_grad():
    out["logits"] = model(x)
    layers = model.mumoe_layers()
    for name, layer in layers.items():
        out["coefficients " + name] = layer.last
    for name, layer in layers.items():
        for n in range(6):
            layer.ablated = [n]
            out[f"ablated {name} {n}"] = model(x).argmax(1)
        layer.ablated = []
torch.save(out, "expected.pth")
)py";

// KIND: "cp" or "tr" (the script's --layer CPMuMoE or TRMuMoE).
std::string fixture(const std::string& blocks, const std::string& kind = "cp") {
  return testkit::reference_models() + "BLOCKS = " + blocks + "\nKIND = \"" + kind + "\"\n" + kFixture;
}

}  // namespace mlp_mixer_test

namespace mm = mlp_mixer_test;

TEST(MlpMixer, OpensFromNamesAndShapesAndMatchesPyTorch) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, mm::fixture("(1,)"));
  const auto expected = read_expected(dir.file("expected.pth"));

  const auto file = model::ModelFile::load(dir.file("mixer.pth"));
  const auto& m = file.manifest();
  EXPECT_EQ(m.architecture, "image-classifier");
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].name, "mixer_blocks.1.0.fn.1");
  EXPECT_EQ(m.layers[0].prefix, "mixer_blocks.1.0.fn.1.");
  EXPECT_EQ(m.layers[1].name, "mixer_blocks.1.1.fn");
  EXPECT_EQ(m.layers[0].config.input_dim, 16);  // tokens
  EXPECT_EQ(m.layers[0].config.output_dim, 24);
  EXPECT_EQ(m.layers[0].config.cp_rank, 12);
  EXPECT_EQ(m.layers[0].config.gate_norm, nn::GateNorm::BatchNorm);
  EXPECT_FALSE(m.layers[0].config.input_layer_norm);
  EXPECT_EQ(m.layers[1].config.input_dim, 32);  // channels
  EXPECT_EQ(m.layers[1].config.output_dim, 64);
  const auto backbone = model::manifest_backbone(m, file.path());
  EXPECT_EQ(backbone.describe(), "MLP-Mixer/8 32 px (2 blocks, width 32, 2 μMoE mixing MLPs)");
  EXPECT_EQ(backbone.in_channels, 3);
  EXPECT_EQ(backbone.mixer.token_hidden, 24);
  EXPECT_EQ(backbone.mixer.channel_hidden, 64);
  EXPECT_EQ(backbone.preprocess.interpolation, "bilinear");

  auto classifier = model::ClassifierModel::load(file);
  EXPECT_TRUE(classifier.has_linear_head());
  EXPECT_EQ(classifier.class_count(), 5);
  // The head has no experts: what needs a μMoE layer there says where they are.
  try {
    classifier.layer();
    ADD_FAILURE() << "a Linear head was taken for a μMoE layer";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("mixer_blocks.1.1.fn"), std::string::npos) << e.what();
  }
  const auto data = data::load_dataset("folder:" + dir.file("img"));
  torch::NoGradGuard no_grad;
  const auto logits = classifier.forward(data, torch::arange(data.size()), torch::kCPU).output;
  expect_close(logits, expected.at("logits"), "logits");
  const auto before = mm::to_vector(expected.at("logits").argmax(1));

  // Every μMoE layer: its coefficients, and each expert's removal with both methods.
  analysis::VitBlockOptions batches;
  batches.batch_size = 5;  // the passes span several batches
  int64_t changed = 0;
  for (const auto& [name, step, rows] : {std::tuple{std::string("mixer_blocks.1.0.fn.1"), int64_t{2}, int64_t{32}},
                                         std::tuple{std::string("mixer_blocks.1.1.fn"), int64_t{3}, int64_t{16}}}) {
    analysis::VitBlockAnalysis analysis(classifier, data, step, batches);
    EXPECT_EQ(analysis.layer_name(), name);
    EXPECT_EQ(analysis.rows_are_patches(), step == 3);
    EXPECT_EQ(analysis.coefficient_rows(), rows);
    EXPECT_EQ(analysis.predictions_before(), before);
    std::vector<torch::Tensor> samples;
    for (int64_t s = 0; s < analysis.samples(); ++s)
      samples.push_back(torch::tensor(analysis.token_coefficients(s), torch::kFloat64).view({rows, 6}));
    const auto& coefficients = expected.at("coefficients " + name);
    expect_close(torch::stack(samples), coefficients, name + " coefficients");
    for (int64_t n = 0; n < 6; ++n) {
      const auto wanted = mm::to_vector(expected.at("ablated " + name + " " + std::to_string(n)));
      EXPECT_EQ(analysis.predictions_after({n}, analysis::AblationMethod::Sparse), wanted) << name << " expert " << n;
      EXPECT_EQ(analysis.predictions_after({n}, analysis::AblationMethod::Naive), wanted) << name << " expert " << n;
      for (size_t i = 0; i < wanted.size(); ++i) changed += wanted[i] != before[i];
      // Only images with a row (patch or channel) using the expert are re-run.
      EXPECT_EQ(analysis.affected_samples({n}), mm::to_vector((coefficients.select(2, n) > 0).any(1).nonzero().flatten()));
    }
    // Galleries and statistics see an image by its strongest row; a channel is no patch.
    analysis::GalleryRequest top;
    top.expert = 1;
    top.order = analysis::GalleryOrder::Top;
    top.count = 4;
    const auto items = analysis.gallery(top).items;
    ASSERT_FALSE(items.empty());
    for (const auto& item : items) {
      const auto column = coefficients[item.sample].select(1, 1);
      EXPECT_NEAR(item.coefficient, column.max().item<double>(), 1e-5);
      EXPECT_EQ(analysis.strongest_row(item.sample, 1), column.argmax().item<int64_t>());
      EXPECT_EQ(item.patch, step == 3 ? column.argmax().item<int64_t>() : -1);
    }
  }
  EXPECT_GT(changed, 0);  // the comparison can fail: these removals change predictions

  // Plain MLPs are not analysed; the commands find the Mixer's layers by name, or its last one.
  EXPECT_THROW(analysis::VitBlockAnalysis(classifier, data, 0), UsageError);
  analysis::SessionOptions options;
  options.model_path = dir.file("mixer.pth");
  options.data_spec = "folder:" + dir.file("img");
  EXPECT_TRUE(analysis::names_vit_block(options));
  EXPECT_EQ(analysis::VitBlockAnalysis::open(options)->layer_name(), "mixer_blocks.1.1.fn");
  options.layer = "mixer_blocks.1.0.fn.1";
  EXPECT_TRUE(analysis::names_vit_block(options));
  options.layer = "mixer_blocks.0.1.fn";  // a plain MLP: not a layer of the file
  EXPECT_FALSE(analysis::names_vit_block(options));
  EXPECT_THROW(analysis::VitBlockAnalysis::open(options), UsageError);

  // Saved in our own format and opened again: the same model.
  classifier.save(dir.file("mixer.safetensors"), nlohmann::json::object());
  auto again = model::ClassifierModel::load(model::ModelFile::load(dir.file("mixer.safetensors")));
  expect_close(again.forward(data, torch::arange(data.size()), torch::kCPU).output, expected.at("logits"),
               "logits after a save");
  EXPECT_EQ(model::ModelFile::load(dir.file("mixer.safetensors")).manifest().layers.size(), 2u);
}

TEST(MlpMixer, AllPlainMixerOpensAndEvaluates) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, mm::fixture("()"));
  const auto expected = read_expected(dir.file("expected.pth"));
  const auto file = model::ModelFile::load(dir.file("mixer.pth"));
  EXPECT_TRUE(file.manifest().layers.empty());
  auto classifier = model::ClassifierModel::load(file);
  const auto data = data::load_dataset("folder:" + dir.file("img"));
  torch::NoGradGuard no_grad;
  expect_close(classifier.forward(data, torch::arange(data.size()), torch::kCPU).output, expected.at("logits"), "logits");
  analysis::SessionOptions options;
  options.model_path = dir.file("mixer.pth");
  options.data_spec = "folder:" + dir.file("img");
  try {
    analysis::VitBlockAnalysis::open(options);
    ADD_FAILURE() << "a Mixer without μMoE layers was analysed";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing to analyse"), std::string::npos) << e.what();
  }
}

TEST(MlpMixer, CommandsWorkOnTheMixer) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, mm::fixture("(1,)"));
  const auto expected = read_expected(dir.file("expected.pth"));
  const auto model = dir.file("mixer.pth");
  const auto data = "folder:" + dir.file("img");
  const auto cache = " --cache " + dir.file("cache.sqlite");
  // info names the layers; evaluate gives the accuracy PyTorch's logits give.
  const auto info = testkit::run_cli("info " + model + " --json");
  ASSERT_EQ(info.code, 0) << info.out;
  EXPECT_NE(info.out.find("mixer_blocks.1.0.fn.1"), std::string::npos) << info.out;
  const auto evaluate = testkit::json_output(testkit::run_cli("evaluate " + model + " --data " + data + " --json"));
  const auto labels = data::load_dataset(data).labels;
  const double accuracy = (expected.at("logits").argmax(1) == labels).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(evaluate.at("accuracy").get<double>(), accuracy, 1e-9) << evaluate.dump();
  // A token-mixing gallery names channels; without --layer, the last μMoE layer is analysed.
  const auto g = testkit::json_output(testkit::run_cli("gallery " + model + " --data " + data +
                                                       " --layer mixer_blocks.1.0.fn.1 --expert 1 --json --quiet" + cache));
  ASSERT_FALSE(g.at("items").empty());
  EXPECT_TRUE(g.at("items")[0].contains("channel")) << g.dump();
  const auto stats = testkit::run_cli("stats " + model + " --data " + data + " --json --quiet" + cache);
  ASSERT_EQ(stats.code, 0) << stats.out;
  EXPECT_NE(stats.out.find("mixer_blocks.1.1.fn"), std::string::npos) << stats.out;
  const auto ablate = testkit::run_cli("ablate " + model + " --data " + data +
                                       " --layer mixer_blocks.1.1.fn --experts 0 --json --quiet" + cache);
  ASSERT_EQ(ablate.code, 0) << ablate.out;
  // predict writes what PyTorch computed: the logits and each μMoE layer's coefficients by name.
  const auto predicted = testkit::json_output(testkit::run_cli("predict " + model + " --data " + data + " --output " +
                                                               dir.file("p.safetensors") + " --coefficients --json"));
  EXPECT_EQ(predicted.at("samples").get<int64_t>(), 24);
  const auto written = io::SafetensorsFile::open(dir.file("p.safetensors"));
  expect_close(written.read("logits"), expected.at("logits"), "predicted logits");
  for (const auto* name : {"mixer_blocks.1.0.fn.1", "mixer_blocks.1.1.fn"})
    expect_close(written.read(name), expected.at(std::string("coefficients ") + name), name);
}

// The one entry point for image layers (analysis/layer_analysis.h): a Mixer's backbone layer
// answers as the block analysis does; its Linear head is refused naming the layers to analyse.
TEST(MlpMixer, LayerAnalysisOpensTheMixersLayers) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, mm::fixture("(1,)"));
  analysis::SessionOptions options;
  options.model_path = dir.file("mixer.pth");
  options.data_spec = "folder:" + dir.file("img");
  options.cache_path = dir.file("cache.sqlite");
  auto a = analysis::LayerAnalysis::open(options);  // no layer named: the last μMoE layer
  ASSERT_NE(a->block(), nullptr);
  EXPECT_EQ(a->session(), nullptr);
  EXPECT_FALSE(a->cached());
  EXPECT_EQ(a->layer_name(), "mixer_blocks.1.1.fn");
  EXPECT_EQ(a->expert_dims(), std::vector<int64_t>{6});
  EXPECT_EQ(a->samples(), 24);
  const auto classifier = model::ClassifierModel::load(model::ModelFile::load(options.model_path));
  analysis::VitBlockAnalysis direct(classifier, data::load_dataset(options.data_spec), 3);
  const auto via = a->statistics(0, 0.2).value;
  const auto wanted = direct.statistics(0.2);
  ASSERT_EQ(via.experts.size(), wanted.experts.size());
  for (size_t n = 0; n < via.experts.size(); ++n) EXPECT_EQ(via.experts[n].load, wanted.experts[n].load);
  EXPECT_EQ(a->ablate(0, {1}, analysis::AblationMethod::Sparse).value.changed_predictions,
            direct.ablate({1}, analysis::AblationMethod::Naive).changed_predictions);
  EXPECT_THROW(a->statistics(1, 0.5), UsageError);  // one expert mode

  // What `compare` reads (layer_comparison.h), for the channel- and the token-mixing layer:
  // rows per image and how many rows each expert takes, against PyTorch's coefficients; the
  // layer's configuration, against the file's.
  const auto expected = read_expected(dir.file("expected.pth"));
  const auto file = model::ModelFile::load(options.model_path);
  for (const std::string name : {"mixer_blocks.1.1.fn", "mixer_blocks.1.0.fn.1"}) {
    options.layer = name;
    auto layer = analysis::LayerAnalysis::open(options);
    const auto taken = expected.at("coefficients " + name) > 0;  // [images, rows, experts]
    EXPECT_EQ(layer->rows_per_sample(), taken.size(1)) << name;
    const auto coverage = layer->row_coverage();
    ASSERT_EQ(coverage.rows_per_expert.size(), 6u) << name;
    for (int64_t n = 0; n < 6; ++n)
      EXPECT_EQ(coverage.rows_per_expert[static_cast<size_t>(n)], taken.select(2, n).sum().item<int64_t>()) << name;
    EXPECT_EQ(coverage.rows_without_expert, (taken.sum(2) == 0).sum().item<int64_t>()) << name;
    EXPECT_EQ(model::layer_config_json(layer->manifest_layer()), model::layer_config_json(file.layer(name))) << name;
    EXPECT_GT(layer->microseconds_per_row(), 0) << name;
  }
  options.layer = "head";
  try {
    analysis::LayerAnalysis::open(options);
    ADD_FAILURE() << "the Linear head was analysed";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("mixer_blocks.1.0.fn.1"), std::string::npos) << e.what();
  }
}

// Bad input: a Mixer whose shapes disagree and a truncated file are refused naming the file; an
// output that is one of predict's inputs is refused and the model is left as it was.
TEST(MlpMixer, InconsistentOrTruncatedMixersAndPredictOverItsModelAreRefused) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, mm::fixture("(1,)") + R"py(
sd = {"module." + k: v for k, v in model.state_dict().items()}
sd["module.mixer_blocks.0.0.fn.1.0.weight"] = torch.randn(24, 15)   # block 0 mixes 15 tokens, block 1 16
torch.save(sd, "inconsistent.pth")
data = open("mixer.pth", "rb").read()
open("truncated.pth", "wb").write(data[: len(data) // 2])
)py");
  for (const auto* name : {"inconsistent.pth", "truncated.pth"}) {
    try {
      model::ModelFile::load(dir.file(name));
      ADD_FAILURE() << name << " opened";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  const auto before = testkit::read_bytes(dir.file("mixer.pth"));
  const auto run = testkit::run_cli("predict " + dir.file("mixer.pth") + " --data folder:" + dir.file("img") +
                                    " --output " + dir.file("mixer.pth"));
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_NE(run.out.find("mixer.pth"), std::string::npos) << run.out;
  EXPECT_EQ(testkit::read_bytes(dir.file("mixer.pth")), before);
}

// Experts removed for good (mumoe export --remove-experts): the file written in the user's layout
// loads into the reference Mixer with load_state_dict(strict=True), and PyTorch's forward of it
// equals the original model's with those experts' coefficients forced to 0 (MuMoEMixing.ablated,
// the reference's a_n := 0) — in two layers at once. Everything else in the file is unchanged.
TEST(MlpMixer, ExportWithoutExpertsLoadsStrictlyAndEqualsTheAblation) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, mm::fixture("(1,)"));
  const auto run = testkit::run_cli("export " + dir.file("mixer.pth") + " --remove-experts mixer_blocks.1.1.fn:1,4 " +
                                    "--remove-experts mixer_blocks.1.0.fn.1:2 --data folder:" + dir.file("img") +
                                    " --output " + dir.file("without.pth") + " --json");
  ASSERT_EQ(run.code, 0) << run.out;
  const auto report = testkit::json_output(run);
  EXPECT_EQ(report.at("layout"), "source") << report.dump();
  EXPECT_EQ(report.at("removed_experts").size(), 2u) << report.dump();
  run_python(dir, testkit::reference_models() + R"py(
def load(path):
    sd = torch.load(path)
    assert all(k.startswith("module.") for k in sd), "the DDP prefix was not kept"
    m = mixer((1,))
    m.load_state_dict({k[len("module."):]: v for k, v in sd.items()}, strict=True)
    return m.eval(), sd
original, before = load("mixer.pth")
exported, after = load("without.pth")
assert set(before) == set(after), sorted(set(before) ^ set(after))
x = load_images("img", mixer_transform())
out = {}
with torch.no_grad():
    out["exported"] = exported(x)
    out["plain"] = original(x)
    layers = original.mumoe_layers()
    layers["mixer_blocks.1.1.fn"].ablated = [1, 4]
    layers["mixer_blocks.1.0.fn.1"].ablated = [2]
    out["ablated"] = original(x)
# Only the two layers' expert factors (MuMoE/MuMoE2 factors.0) may differ.
out["changed_keys"] = torch.tensor([k.endswith("factors.0") and ("mixer_blocks.1." in k)
                                    for k in before if not torch.equal(before[k], after[k])], dtype=torch.long)
torch.save(out, "check.pth")
)py");
  const auto check = read_expected(dir.file("check.pth"));
  expect_close(check.at("exported"), check.at("ablated"), "exported vs ablated logits");
  // The comparison can fail: removing these experts changes the logits.
  EXPECT_GT((check.at("ablated") - check.at("plain")).abs().max().item<double>(), 1e-3);
  EXPECT_EQ(check.at("changed_keys").numel(), 4);  // MuMoE and MuMoE2 of two layers
  EXPECT_EQ(check.at("changed_keys").sum().item<int64_t>(), 4);

  // An input of the command is never the output: the class names file here is kept.
  testkit::write_bytes(dir.file("names.txt"), "a\nb\nc\nd\ne\n");
  const auto over = testkit::run_cli("export " + dir.file("mixer.pth") + " --class-names " + dir.file("names.txt") +
                                     " --remove-experts mixer_blocks.1.1.fn:1 --data folder:" + dir.file("img") +
                                     " --output " + dir.file("names.txt"));
  EXPECT_EQ(over.code, 1) << over.out;
  EXPECT_EQ(testkit::read_bytes(dir.file("names.txt")), "a\nb\nc\nd\ne\n");

  // Refused with the file named and nothing written: an expert out of range, an unknown layer.
  for (const auto* bad : {"mixer_blocks.1.1.fn:6", "mixer_blocks.0.1.fn:0"}) {
    const auto refused = testkit::run_cli("export " + dir.file("mixer.pth") + " --remove-experts " + bad +
                                          " --data folder:" + dir.file("img") + " --output " + dir.file("bad.pth"));
    EXPECT_EQ(refused.code, 1) << bad << ": " << refused.out;
    EXPECT_FALSE(std::filesystem::exists(dir.file("bad.pth"))) << bad;
  }
}

// The script's --layer TRMuMoE: tensor-ring mixing MLPs (ranks 4, 4 and 0.19 of the mixed width)
// open from names and shapes, and the app's logits, coefficients and every expert's removal (both
// methods) equal the test's PyTorch transcription of spec §1's ring contraction.
TEST(MlpMixer, TensorRingMixingLayersMatchPyTorch) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, mm::fixture("(1,)", "tr"));
  const auto expected = read_expected(dir.file("expected.pth"));
  const auto file = model::ModelFile::load(dir.file("mixer.pth"));
  const auto& layers = file.manifest().layers;
  ASSERT_EQ(layers.size(), 2u);
  for (const auto& [layer, width] : {std::pair{0, int64_t{16}}, std::pair{1, int64_t{32}}}) {
    const auto& config = layers[static_cast<size_t>(layer)].config;
    EXPECT_EQ(config.factorization, nn::Factorization::TR) << layers[static_cast<size_t>(layer)].name;
    EXPECT_EQ(config.tr_ranks, (std::vector<int64_t>{4, 4, static_cast<int64_t>(width * 0.19)}));
  }
  auto classifier = model::ClassifierModel::load(file);
  const auto data = data::load_dataset("folder:" + dir.file("img"));
  torch::NoGradGuard no_grad;
  expect_close(classifier.forward(data, torch::arange(data.size()), torch::kCPU).output, expected.at("logits"), "logits");
  const auto before = mm::to_vector(expected.at("logits").argmax(1));
  int64_t changed = 0;
  for (const auto& [name, step, rows] : {std::tuple{std::string("mixer_blocks.1.0.fn.1"), int64_t{2}, int64_t{32}},
                                         std::tuple{std::string("mixer_blocks.1.1.fn"), int64_t{3}, int64_t{16}}}) {
    analysis::VitBlockAnalysis analysis(classifier, data, step);
    std::vector<torch::Tensor> samples;
    for (int64_t s = 0; s < analysis.samples(); ++s)
      samples.push_back(torch::tensor(analysis.token_coefficients(s), torch::kFloat64).view({rows, 6}));
    expect_close(torch::stack(samples), expected.at("coefficients " + name), name + " coefficients");
    for (int64_t n = 0; n < 6; ++n) {
      const auto wanted = mm::to_vector(expected.at("ablated " + name + " " + std::to_string(n)));
      EXPECT_EQ(analysis.predictions_after({n}, analysis::AblationMethod::Sparse), wanted) << name << " expert " << n;
      EXPECT_EQ(analysis.predictions_after({n}, analysis::AblationMethod::Naive), wanted) << name << " expert " << n;
      for (size_t i = 0; i < wanted.size(); ++i) changed += wanted[i] != before[i];
    }
  }
  EXPECT_GT(changed, 0);  // the comparison can fail: these removals change predictions
}
