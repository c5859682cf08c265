// A timm-layout ViT whose blocks' MLPs are μMoE two-layer blocks, against real PyTorch: the test's
// Python (tests/support/reference_models.py: vit_with_mumoe_mlps — block 0 keeps timm's fc1/fc2,
// blocks 1 and 2 hold μMoE MLPs in the reference layout, and a μMoE head) saves the randomised
// model with torch.save, writes PNGs and computes, through PIL and torchvision's eval transform,
// the features, the head's and each block's coefficients, the logits, and the predictions with
// each block expert removed in turn (a_n := 0, i.e. W_n := 0). The app opens the .pth from names
// and shapes alone and must match: values to 1e-5, ablated predictions exactly, with both of
// VitBlockAnalysis's methods. Exported edits load back into the Python model with strict=True.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/layer_comparison.h"
#include "analysis/vit_block_analysis.h"
#include "cli_runner.h"
#include "data/dataset.h"
#include "model/classifier_model.h"
#include "editing/logit_edit.h"
#include "editing/model_export.h"
#include "io/errors.h"
#include "io/pytorch_checkpoint.h"
#include "model/model_file.h"
#include "model/model_summary.h"
#include "model/open_options.h"
#include "python_fixture.h"
#include "python_reference.h"
#include "temp_dir.h"

using namespace mumoe;
using testkit::run_python;
using testkit::TempDir;

namespace {

// The PyTorch models, images and transforms (tests/support/reference_models.py), prepended to
// each fixture's script.
using testkit::expect_close;
using testkit::read_expected;

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const auto c = t.to(torch::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// The Python model, 24 images (35 px, two classes) and everything the tests compare with;
// CLIP = True for the CLIP flavour (class-token pooling, QuickGELU, CLIP's transform).
constexpr const char* kFixture = R"py(
torch.manual_seed(0)
CLIP = globals().get("CLIP", False)
model = vit_with_mumoe_mlps(clip=CLIP)
torch.save(model.state_dict(), "vit_blocks.pth")
write_images("img", (35, 35), 12, 7)
x = load_images("img", clip_transform() if CLIP else eval_transform(32, 0.9, BICUBIC, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)))
vit, head = model
out = {}
with torch.no_grad():
    f = vit(x)
    out.update(features=f, coefficients=head.coefficients(f), logits=head(f))
    for b in (1, 2):
        out[f"block{b}"] = vit.blocks[b].mlp.last
    for b in (1, 2):
        for n in range(6):
            vit.blocks[b].mlp.ablated = [n]
            out[f"ablated{b}_{n}"] = model(x).argmax(1)
        vit.blocks[b].mlp.ablated = [2, 4]
        out[f"ablated{b}_2_4"] = model(x).argmax(1)
        vit.blocks[b].mlp.ablated = []
torch.save(out, "expected.pth")
)py";

}  // namespace

TEST(VitMumoeBlocks, OpensFromNamesAndShapesAndMatchesPyTorch) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + kFixture);
  const auto expected = read_expected(dir.file("expected.pth"));

  const auto summary = model::summarize_model_file(dir.file("vit_blocks.pth"));
  EXPECT_EQ(summary.architecture, "image-classifier");
  EXPECT_EQ(summary.backbone, "ViT/8 32 px (3 blocks, width 64, 1 heads, GELU, μMoE MLPs in 2 blocks)");
  ASSERT_EQ(summary.layers.size(), 3u);
  EXPECT_EQ(summary.layers[0].name, "head");
  EXPECT_EQ(summary.layers[1].name, "blocks.1.mlp");
  EXPECT_EQ(summary.layers[1].prefix, "0.blocks.1.mlp.");
  EXPECT_EQ(summary.layers[2].name, "blocks.2.mlp");
  // Width 64 is no standard ViT's: the head count is a guess, and info says so once.
  ASSERT_EQ(summary.notes.size(), 1u);
  EXPECT_NE(summary.notes[0].find("attention heads guessed: 1"), std::string::npos) << summary.notes[0];

  // 64 wide is one head of 64 by default; the Python model has 2: --heads 2.
  model::LayoutOverrides o;
  o.vit_heads = 2;
  EXPECT_TRUE(model::summarize_model_file(dir.file("vit_blocks.pth"), o).notes.empty());  // given: no guess
  const auto file = model::ModelFile::load(dir.file("vit_blocks.pth"), o);
  const auto& mlp = file.layer("blocks.1.mlp").config;
  EXPECT_TRUE(mlp.is_block());
  EXPECT_EQ(mlp.output_dim, 256);
  EXPECT_EQ(mlp.gate_norm, nn::GateNorm::LayerNorm);
  EXPECT_TRUE(mlp.input_layer_norm);
  auto classifier = model::ClassifierModel::load(file);
  const auto data = data::load_dataset("folder:" + dir.file("img"));
  torch::NoGradGuard no_grad;
  const auto out = classifier.forward(data, torch::arange(data.size()), torch::kCPU);
  expect_close(classifier.layer_inputs(data, 0, data.size()), expected.at("features"), "features");
  expect_close(out.coefficients.at(0), expected.at("coefficients"), "head coefficients");
  expect_close(out.output, expected.at("logits"), "logits");

  // Each block's coefficients per token, from the analysis of that block.
  for (int64_t block : {1, 2}) {
    analysis::VitBlockAnalysis analysis(classifier, data, block);
    std::vector<torch::Tensor> rows;
    for (int64_t s = 0; s < analysis.samples(); ++s)
      rows.push_back(torch::tensor(analysis.token_coefficients(s), torch::kFloat64).view({17, 6}));
    expect_close(torch::stack(rows), expected.at("block" + std::to_string(block)),
                 "block " + std::to_string(block) + " coefficients");
    EXPECT_EQ(analysis.predictions_before(), to_vector(expected.at("logits").argmax(1)));
    EXPECT_EQ(analysis.patches(), 16);
    EXPECT_EQ(analysis.prefix_tokens(), 1);
  }
  // The commands route a layer to this analysis only in an image classifier that has it.
  analysis::SessionOptions options;
  options.model_path = dir.file("vit_blocks.pth");
  options.overrides = o;
  options.layer = "blocks.1.mlp";
  EXPECT_TRUE(analysis::names_vit_block(options));
  options.layer = "blocks.01.mlp";
  EXPECT_FALSE(analysis::names_vit_block(options));
  run_python(dir, testkit::reference_models() + R"py(
head = MuMoE(8, 3, 4, 5)   # bare μMoE layers that happen to be named like a ViT's block MLPs
torch.save({f"blocks.1.mlp.{k}": v for k, v in head.state_dict().items()}, "bare.pth")
)py");
  options.model_path = dir.file("bare.pth");
  options.overrides = {};
  options.layer = "blocks.1.mlp";
  EXPECT_FALSE(analysis::names_vit_block(options));

  // Block 0 keeps timm's MLP; "blocks.3" does not exist.
  EXPECT_THROW(analysis::VitBlockAnalysis(classifier, data, 0), UsageError);
  EXPECT_THROW(analysis::VitBlockAnalysis(classifier, data, 3), UsageError);
  // The head's analysis session refuses a block name, saying which commands take it.
  try {
    model::ClassifierModel::load(file, "blocks.1.mlp");
    ADD_FAILURE() << "a block MLP was taken for the classifier's layer";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("mumoe ablate"), std::string::npos) << e.what();
  }
}

// Both flavours: with average pooling every later token matters; with class-token pooling the
// last block's ablation re-evaluates the class token alone.
class VitMumoeBlockAblation : public ::testing::TestWithParam<bool> {};

TEST_P(VitMumoeBlockAblation, PredictsAsPyTorchWithBothMethods) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  const bool clip = GetParam();
  run_python(dir, testkit::reference_models() + (clip ? "CLIP = True\n" : "") + kFixture);
  const auto expected = read_expected(dir.file("expected.pth"));
  model::LayoutOverrides o;
  o.vit_heads = 2;
  if (clip) o.backbone_preset = "vit_base_patch32_clip_quickgelu_224.openai";
  const auto classifier = model::ClassifierModel::load(model::ModelFile::load(dir.file("vit_blocks.pth"), o));
  const auto data = data::load_dataset("folder:" + dir.file("img"));
  const auto before = to_vector(expected.at("logits").argmax(1));
  int64_t changed = 0, changed_last = 0;
  // Batches of 5 images: the baseline, the naive passes and the sparse re-runs span several.
  analysis::VitBlockOptions batches;
  batches.batch_size = 5;
  for (int64_t block : {1, 2}) {
    analysis::VitBlockAnalysis analysis(classifier, data, block, batches);
    const auto b = std::to_string(block);
    for (int64_t n = 0; n < 6; ++n) {
      const auto wanted = to_vector(expected.at("ablated" + b + "_" + std::to_string(n)));
      const auto sparse = analysis.predictions_after({n}, analysis::AblationMethod::Sparse);
      EXPECT_EQ(sparse, wanted) << "block " << block << " expert " << n << " (sparse)";
      EXPECT_EQ(analysis.predictions_after({n}, analysis::AblationMethod::Naive), wanted)
          << "block " << block << " expert " << n << " (naive)";
      for (size_t i = 0; i < wanted.size(); ++i) changed += wanted[i] != before[i];
      // Only images where some token uses the expert can change — after the last block, with
      // class-token pooling, only its class token.
      const auto affected = analysis.affected_samples({n});
      const auto used = expected.at("block" + b).select(2, n) > 0;  // [images, tokens]
      const auto wanted_affected = (clip && block == 2 ? used.select(1, 0) : used.any(1)).nonzero().flatten();
      EXPECT_EQ(affected, to_vector(wanted_affected)) << "block " << block << " expert " << n;
      if (block == 2)
        for (size_t i = 0; i < wanted.size(); ++i) changed_last += wanted[i] != before[i];
      for (size_t i = 0; i < wanted.size(); ++i)
        if (wanted[i] != before[i]) {
          EXPECT_TRUE(std::binary_search(affected.begin(), affected.end(), static_cast<int64_t>(i)));
        }
    }
    EXPECT_EQ(analysis.predictions_after({2, 4}, analysis::AblationMethod::Sparse),
              to_vector(expected.at("ablated" + b + "_2_4")));
    // The sweep's outcomes are the single ablations' (the accounting is the head's, tested there).
    const auto sweep = analysis.sweep(analysis::AblationMethod::Sparse);
    ASSERT_EQ(sweep.experts.size(), 6u);
    for (int64_t n = 0; n < 6; ++n) {
      const auto wanted = to_vector(expected.at("ablated" + b + "_" + std::to_string(n)));
      int64_t differ = 0;
      for (size_t i = 0; i < wanted.size(); ++i) differ += wanted[i] != before[i];
      EXPECT_EQ(sweep.experts[n].changed_predictions, differ);
    }
    // Galleries: each image's strongest patch, best first, never the class token.
    analysis::GalleryRequest top;
    top.expert = 0;
    top.order = analysis::GalleryOrder::Top;
    top.count = 5;
    const auto hits = analysis.gallery(top).items;
    ASSERT_FALSE(hits.empty());
    const auto block_coefficients = expected.at("block" + b);
    for (size_t i = 0; i < hits.size(); ++i) {
      const auto row = block_coefficients[hits[i].sample].select(1, 0).slice(0, 1);
      EXPECT_NEAR(hits[i].coefficient, row.max().item<double>(), 1e-5);
      EXPECT_NEAR(hits[i].coefficient, row[hits[i].patch].item<double>(), 1e-5);
      if (i > 0) {
        EXPECT_GE(hits[i - 1].coefficient, hits[i].coefficient);
      }
    }
    const auto tile = analysis.image(hits[0].sample, hits[0].patch);
    EXPECT_EQ(tile.height, 32);
    EXPECT_EQ(tile.channels, 3);
    // Statistics count an image towards an expert's load when one of its patches reaches the
    // threshold: a brute-force count over Python's coefficients.
    const double threshold = 0.2;
    const auto statistics = analysis.statistics(threshold);
    const auto patches_only = block_coefficients.slice(1, 1);  // [images, patches, experts]
    for (int64_t n = 0; n < 6; ++n) {
      int64_t load = 0, support = 0;
      for (int64_t i = 0; i < patches_only.size(0); ++i) {
        const double strongest = patches_only[i].select(1, n).max().item<double>();
        load += strongest >= threshold;
        support += strongest > 0;
      }
      EXPECT_EQ(statistics.experts[static_cast<size_t>(n)].load, load) << "block " << block << " expert " << n;
      EXPECT_EQ(statistics.experts[static_cast<size_t>(n)].support, support) << "block " << block << " expert " << n;
    }
    // A random gallery draws only images with a patch at or above its threshold.
    analysis::GalleryRequest random;
    random.expert = 1;
    random.threshold = threshold;
    random.count = 100;
    for (const auto& item : analysis.gallery(random).items)
      EXPECT_GE(patches_only[item.sample].select(1, 1).max().item<double>(), threshold - 1e-9);
  }
  // The test can fail: removing these experts changes predictions Python computed, in the last
  // block too.
  EXPECT_GT(changed, 0);
  EXPECT_GT(changed_last, 0);
}

INSTANTIATE_TEST_SUITE_P(Pooling, VitMumoeBlockAblation, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "ClassToken" : "Average"; });

TEST(VitMumoeBlocks, ExportedEditsLoadIntoTheUsersModelWithStrictTrue) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + kFixture);
  model::LayoutOverrides o;
  o.vit_heads = 2;
  const auto source = model::ModelFile::load(dir.file("vit_blocks.pth"), o);
  const auto data = data::load_dataset("folder:" + dir.file("img"));
  editing::LogitEdit edit;
  edit.target = "1";
  edit.output = 1;
  edit.mean_coefficients = {0.3, 0.1, 0.2, 0.2, 0.1, 0.1};
  edit.lambda = 2.0;
  editing::ExportRequest request;
  request.output = dir.file("edited.pth");
  const auto report = editing::export_edited_model(source, {edit}, data, request);
  EXPECT_EQ(report.layout, editing::ExportLayout::Source);
  EXPECT_LE(report.max_abs_difference, 1e-5);
  run_python(dir, testkit::reference_models() + R"py(
state = torch.load("edited.pth")
model = vit_with_mumoe_mlps(state["1.MuMoE.factors.0"].shape[1])
model.load_state_dict(state, strict=True)
x = load_images("img", eval_transform(32, 0.9, BICUBIC, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)))
with torch.no_grad():
    torch.save({"logits": model(x)}, "edited_expected.pth")
)py");
  // The app reopens its export (options from the sidecar) with Python's logits.
  auto reopened = model::ClassifierModel::load(model::ModelFile::load(dir.file("edited.pth")));
  torch::NoGradGuard no_grad;
  expect_close(reopened.forward(data, torch::arange(data.size()), torch::kCPU).output,
               read_expected(dir.file("edited_expected.pth")).at("logits"), "logits of the exported model");
}

// The CLI's block path: `mumoe ablate/gallery --layer blocks.L.mlp`, checked against Python's
// predictions; bad block names are refused naming the layers there are.
TEST(VitMumoeBlocks, CliAblatesAndDrawsGalleriesOfABlock) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + kFixture);
  const auto expected = read_expected(dir.file("expected.pth"));
  const std::string common = dir.file("vit_blocks.pth") + " --heads 2 --data folder:" + dir.file("img") + " --quiet ";
  auto run_json = [](const std::string& args) {
    const auto run = testkit::run_cli(args);
    EXPECT_EQ(run.code, 0) << run.out;
    return nlohmann::json::parse(run.out.substr(run.out.find('{')));
  };
  const auto j = run_json("ablate " + common + "--layer blocks.2.mlp --experts 2,4 --json");
  EXPECT_EQ(j.at("layer"), "blocks.2.mlp");
  EXPECT_EQ(j.at("images"), 24);
  const auto before = to_vector(expected.at("logits").argmax(1));
  const auto after = to_vector(expected.at("ablated2_2_4"));
  const auto labels = to_vector(torch::arange(24) / 12);  // a/ then b/, 12 each
  int64_t changed = 0, correct_a = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    changed += after[i] != before[i];
    correct_a += labels[i] == 0 && after[i] == 0;
  }
  EXPECT_EQ(j.at("experts")[0].at("changed_predictions"), changed);
  EXPECT_NEAR(j.at("experts")[0].at("per_class_accuracy_after")[0].get<double>(), correct_a / 12.0, 1e-12);

  const auto sheet = dir.file("sheet.png");
  const auto g = run_json("gallery " + common + "--layer blocks.1.mlp --expert 0 --count 4 --json --output " + sheet);
  ASSERT_EQ(g.at("items").size(), 4u);
  EXPECT_EQ(g.at("patch_grid"), 4);
  EXPECT_TRUE(std::filesystem::file_size(sheet) > 0);
  for (const auto& item : g.at("items")) EXPECT_EQ(item.at("patch").get<int64_t>() / 4, item.at("row").get<int64_t>());
  // A random draw is a block's gallery too, among images with a patch at a >= threshold.
  const auto r = run_json("gallery " + common + "--layer blocks.1.mlp --expert 0 --order random --threshold 0.1 --json");
  EXPECT_EQ(r.at("order"), "random");
  for (const auto& item : r.at("items")) EXPECT_GE(item.at("coefficient").get<double>(), 0.1);
  // And its statistics.
  const auto st = run_json("stats " + common + "--layer blocks.1.mlp --threshold 0.1 --json");
  EXPECT_EQ(st.at("experts").size(), 6u);
  EXPECT_EQ(st.at("samples"), 24);
  // The sheet may not be written over the model it reads.
  const auto model_bytes = testkit::read_bytes(dir.file("vit_blocks.pth"));
  const auto over = testkit::run_cli("gallery " + common + "--layer blocks.1.mlp --expert 0 --output " +
                                     dir.file("vit_blocks.pth"));
  EXPECT_NE(over.code, 0);
  EXPECT_EQ(testkit::read_bytes(dir.file("vit_blocks.pth")), model_bytes);

  for (const std::string bad : {"blocks.0.mlp", "blocks.9.mlp"}) {
    const auto run = testkit::run_cli("ablate " + common + "--layer " + bad + " --experts 1");
    EXPECT_NE(run.code, 0) << bad;
    EXPECT_NE(run.out.find("layers: head, blocks.1.mlp, blocks.2.mlp"), std::string::npos) << run.out;
  }
  const auto run = testkit::run_cli("ablate " + common + "--layer blocks.1.mlp --experts 6");
  EXPECT_NE(run.code, 0);
  EXPECT_NE(run.out.find("experts 0–5"), std::string::npos) << run.out;
  // --max-images takes the first images; a negative count is refused.
  EXPECT_EQ(run_json("ablate " + common + "--layer blocks.1.mlp --experts 1 --max-images 10 --json").at("images"), 10);
  const auto negative = testkit::run_cli("ablate " + common + "--layer blocks.1.mlp --experts 1 --max-images -1");
  EXPECT_NE(negative.code, 0) << negative.out;
  // A block's sweep is kept in the cache; --recompute computes it again.
  const auto sweep = "ablate " + common + "--layer blocks.1.mlp --all --json --cache " + dir.file("sweeps.sqlite");
  const auto first = run_json(sweep), again = run_json(sweep), recomputed = run_json(sweep + " --recompute");
  EXPECT_FALSE(first.at("from_cache").get<bool>());
  EXPECT_TRUE(again.at("from_cache").get<bool>());
  EXPECT_FALSE(recomputed.at("from_cache").get<bool>());
  EXPECT_EQ(again.at("experts"), first.at("experts"));
  EXPECT_EQ(recomputed.at("experts"), first.at("experts"));
}

// `compare` of a block's MLP counts over every token of every image (the row's tokens, dead
// experts and dropped tokens from PyTorch's per-token coefficients), and its sweep is the one
// kept in the cache.
TEST(VitMumoeBlocks, CompareCountsEveryTokenOfABlockAsPyTorch) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + kFixture);
  const auto expected = read_expected(dir.file("expected.pth"));
  analysis::SessionOptions options;
  options.model_path = dir.file("vit_blocks.pth");
  options.overrides.vit_heads = 2;
  options.data_spec = "folder:" + dir.file("img");
  options.cache_path = dir.file("cache.sqlite");
  options.layer = "blocks.2.mlp";
  std::vector<std::string> steps;
  const auto row = analysis::compare_layer(options, [&](const std::string& step, int64_t, int64_t, double) {
    if (steps.empty() || steps.back() != step) steps.push_back(step);
    return true;
  });
  EXPECT_EQ(steps, (std::vector<std::string>{"Reading samples", "Sweep"}));

  const auto coefficients = expected.at("block2");  // [24 images, 17 tokens, 6 experts]
  ASSERT_EQ(coefficients.sizes(), (std::vector<int64_t>{24, 17, 6}));
  const auto taken = coefficients > 0;
  const auto dead = (taken.sum(std::vector<int64_t>{0, 1}) == 0).sum().item<int64_t>();
  const auto dropped = (taken.sum(2) == 0).sum().item<int64_t>();
  const auto file = model::ModelFile::load(options.model_path, options.overrides);
  const auto& layer = file.layer("blocks.2.mlp");
  EXPECT_EQ(row.layer, "blocks.2.mlp");
  EXPECT_EQ(row.family, layer.family());
  EXPECT_EQ(row.experts, 6);
  EXPECT_EQ(row.parameters, layer.parameter_count());
  EXPECT_EQ(row.samples, 24);
  EXPECT_EQ(row.tokens, 24 * 17);
  EXPECT_EQ(row.dead_experts, dead);
  EXPECT_EQ(row.dropped_tokens, dropped);
  const auto labels = (torch::arange(24) >= 12).to(torch::kLong);  // a/ then b/, 12 each
  EXPECT_DOUBLE_EQ(row.accuracy, (expected.at("logits").argmax(1) == labels).to(torch::kDouble).mean().item<double>());
  EXPECT_DOUBLE_EQ(row.multiply_adds_per_sample, analysis::layer_multiply_adds(layer, 17));
  EXPECT_GT(row.microseconds_per_sample, 0);
  EXPECT_FALSE(row.from_cache);
  // The baseline pass runs again; the sweep is read back.
  EXPECT_TRUE(analysis::compare_layer(options).from_cache);
}

// A block MLP that is not a two-layer μMoE block width → hidden → width (here a single μMoE layer)
// is no ViT of ours: without a preset the file opens as its bare μMoE layers, with one the mismatch
// is an error naming the block. A remembered sidecar whose checkpoint key is not a string is
// named too.
TEST(VitMumoeBlocks, AMalformedBlockMlpIsNamedNotRun) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + R"py(
vit = ViT(32, 8, 64, 2, 2, clip=False)
vit.blocks[1].mlp = MuMoE(64, 64, 6, 8)   # one layer, no MuMoE2
torch.save(nn.Sequential(vit, MuMoE(64, 5, 6, 16)).state_dict(), "single.pth")
)py");
  const auto path = dir.file("single.pth");
  EXPECT_EQ(model::summarize_model_file(path).architecture, "pytorch-state-dict");
  model::LayoutOverrides vit;
  vit.backbone_preset = "vit";
  try {
    model::ModelFile::load(path, vit);
    ADD_FAILURE() << "a single μMoE layer was taken for a block MLP";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("block 1 is not a two-layer μMoE block"), std::string::npos) << e.what();
  }
  testkit::write_bytes(model::manifest_sidecar_path(path),
                       R"({"manifest": {}, "model_file_bytes": )" + std::to_string(std::filesystem::file_size(path)) +
                           R"(, "checkpoint_key": 7})");
  try {
    model::ModelFile::load(path);
    ADD_FAILURE() << "a checkpoint key of the wrong type was accepted";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("'checkpoint_key' is not a string"), std::string::npos) << e.what();
  }
}
