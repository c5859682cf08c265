// Users' vision models against real PyTorch: each test has /usr/bin/python3 (or
// $MUMOE_TEST_PYTHON) build a model in the layout researchers save — a timm-layout ViT (written here in a few lines of Python, CLIP and
// plain flavours) or torchvision's own resnet18, with a μMoE head from the spec's layout —
// randomise it, save its state dict with torch.save, write PNG images, and run the model on those
// images through PIL and torchvision's eval transforms. The app then opens the .pth with nothing
// but the file (architecture inferred from names and shapes), decodes the PNGs itself, and its
// features, coefficients and logits must match Python's (float32, relative error ≤ 1e-5).
// Exported edits must load back into the Python model with strict=True and give the edited
// logits Python computes itself from the unedited ones.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/analysis_session.h"
#include "analysis/extraction.h"
#include "analysis/run_data.h"
#include "data/dataset.h"
#include "editing/logit_edit.h"
#include "editing/model_export.h"
#include "io/errors.h"
#include "io/pytorch_checkpoint.h"
#include "model/classifier_model.h"
#include "model/model_file.h"
#include "model/model_summary.h"
#include "model/open_options.h"
#include "nn/vision_backbones.h"
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

struct Outputs {
  torch::Tensor features, coefficients, logits;
};

Outputs run_app(const std::string& model_path, const std::string& images, const model::LayoutOverrides& o = {}) {
  const auto file = model::ModelFile::load(model_path, o);
  auto classifier = model::ClassifierModel::load(file);
  const auto data = data::load_dataset("folder:" + images);
  classifier.check_compatible(data);
  torch::NoGradGuard no_grad;
  const auto out = classifier.forward(data, torch::arange(data.size()), torch::kCPU);
  return {classifier.layer_inputs(data, 0, data.size()), out.coefficients.at(0), out.output};
}

model::LayoutOverrides quickgelu() {
  model::LayoutOverrides o;
  o.backbone_preset = "vit_base_patch32_clip_quickgelu_224.openai";
  return o;
}

void expect_matches_python(const Outputs& app, const std::map<std::string, torch::Tensor>& expected) {
  expect_close(app.features, expected.at("features"), "features");
  expect_close(app.coefficients, expected.at("coefficients"), "coefficients");
  expect_close(app.logits, expected.at("logits"), "logits");
}

TEST(VisionBackbones, ClipVitWithMumoeHeadFromPthMatchesPyTorch) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  // 35 px images: the CLIP transform (crop_pct 0.9, 32 px) keeps the size and crops the centre,
  // so resizing cannot blur the comparison (the resize itself is measured below).
  run_python(dir, testkit::reference_models() + R"py(
model = clip_vit_with_head()
torch.save(model.state_dict(), "vit_clip.pth")
write_images("img", (35, 35), 3, 1)
save_expected(model, load_images("img", clip_transform()), "expected.pth")
)py");
  // A CLIP-style ViT (norm_pre, no patch bias) defaults to the CLIP preset as timm builds it (GELU).
  const auto summary = model::summarize_model_file(dir.file("vit_clip.pth"));
  EXPECT_EQ(summary.architecture, "image-classifier");
  EXPECT_EQ(summary.backbone, "ViT/8 32 px (2 blocks, width 128, 2 heads, GELU)");
  EXPECT_EQ(summary.backbone_prefix, "0.");
  EXPECT_EQ(summary.backbone_preset, "vit_base_patch32_clip_224.openai");
  ASSERT_EQ(summary.layers.size(), 1u);
  EXPECT_EQ(summary.layers[0].name, "head");
  EXPECT_EQ(summary.layers[0].prefix, "1.");
  // This model is CLIP's own QuickGELU flavour: its preset matches Python ...
  expect_matches_python(run_app(dir.file("vit_clip.pth"), dir.file("img"), quickgelu()),
                        read_expected(dir.file("expected.pth")));
  // ... and the default's GELU gives other features: the preset matters.
  const auto wrong = run_app(dir.file("vit_clip.pth"), dir.file("img"));
  EXPECT_GT((wrong.features - read_expected(dir.file("expected.pth")).at("features")).abs().max().item<double>(), 1e-3);
}

TEST(VisionBackbones, PlainVitWithAveragePoolingAndFcNormMatchesPyTorch) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + R"py(
model = nn.Sequential(ViT(32, 8, 128, 2, 2, clip=False), MuMoE(128, 4, 5, 8)).eval()
torch.save({"model": model.state_dict(), "epoch": 7}, "vit_plain.pth")
write_images("img", (35, 35), 2, 2)
save_expected(model, load_images("img", eval_transform(32, 0.9, BICUBIC, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))), "expected.pth")
)py");
  const auto summary = model::summarize_model_file(dir.file("vit_plain.pth"));
  EXPECT_EQ(summary.backbone, "ViT/8 32 px (2 blocks, width 128, 2 heads, GELU)");
  EXPECT_EQ(summary.backbone_preset, "vit");
  expect_matches_python(run_app(dir.file("vit_plain.pth"), dir.file("img")), read_expected(dir.file("expected.pth")));
}

TEST(VisionBackbones, TorchvisionResNet18WithMumoeFcMatchesPyTorch) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  // torchvision's eval transform: 256 → centre 224 (256 px images keep their size).
  run_python(dir, testkit::reference_models() + R"py(
model = torchvision.models.resnet18()
for m in model.modules():
    if isinstance(m, nn.BatchNorm2d):
        m.running_mean.normal_(0, 0.1); m.running_var.uniform_(0.5, 1.5)
        m.weight.data.normal_(1, 0.1); m.bias.data.normal_(0, 0.1)
model.fc = MuMoE(512, 6, 8, 16)
model.eval()
torch.save(model.state_dict(), "resnet18.pth")
write_images("img", (256, 256), 1, 3)
x = load_images("img", eval_transform(224, 0.875, BILINEAR, IMAGENET_MEAN, IMAGENET_STD))
with torch.no_grad():
    model.fc = nn.Identity()
    f = model(x)
    head = torch.load("resnet18.pth")
    fc = MuMoE(512, 6, 8, 16)
    fc.load_state_dict({k[3:]: v for k, v in head.items() if k.startswith("fc.")})
    fc.eval()
    torch.save({"features": f, "coefficients": fc.coefficients(f), "logits": fc(f)}, "expected.pth")
)py");
  const auto summary = model::summarize_model_file(dir.file("resnet18.pth"));
  EXPECT_EQ(summary.backbone, "ResNet-18 224 px");
  EXPECT_EQ(summary.backbone_prefix, "");
  EXPECT_EQ(summary.layers.at(0).prefix, "fc.");
  expect_matches_python(run_app(dir.file("resnet18.pth"), dir.file("img")), read_expected(dir.file("expected.pth")));
}

// How close the app's resize (LibTorch's antialiased bicubic on float pixels, clamped) is to PIL's
// (bicubic on 8-bit pixels, as timm's transform runs it), on images that really are resized, and
// what that does to a model's predictions.
TEST(VisionBackbones, EvalTransformIsCloseToPilsAndKeepsPredictions) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + R"py(
model = clip_vit_with_head()
torch.save(model.state_dict(), "vit_clip.pth")
write_images("img", (61, 47), 8, 4)
x = load_images("img", clip_transform())
torch.save({"pixels": x}, "pil_pixels.pth")
save_expected(model, x, "expected.pth")
)py");
  const auto data = data::with_images_in_memory(data::load_dataset("folder:" + dir.file("img")));
  auto file = model::ModelFile::load(dir.file("vit_clip.pth"), quickgelu());
  auto classifier = model::ClassifierModel::load(file);
  const auto config = classifier.image_classifier()->backbone_config();
  const auto ours = nn::preprocess_images(data::to_float_images(data.images), config);
  const auto pil = read_expected(dir.file("pil_pixels.pth")).at("pixels");
  ASSERT_EQ(ours.sizes(), pil.sizes());
  // In 8-bit steps of the [0, 1] image: normalised differences times std.
  const auto std = torch::tensor({0.26862954, 0.26130258, 0.27577711}).view({1, 3, 1, 1});
  const auto steps = ((ours - pil).abs() * std * 255).to(torch::kFloat64);
  const double mean_steps = steps.mean().item<double>(), max_steps = steps.max().item<double>();
  std::cout << "[ measured ] resize vs PIL: mean " << mean_steps << ", max " << max_steps << " 8-bit steps\n";
  EXPECT_LT(mean_steps, 0.6);
  EXPECT_LT(max_steps, 2.5);
  torch::NoGradGuard no_grad;
  const auto logits = classifier.forward(data, torch::arange(data.size()), torch::kCPU).output;
  const auto expected = read_expected(dir.file("expected.pth")).at("logits");
  const double agree = logits.argmax(1).eq(expected.argmax(1)).to(torch::kFloat64).mean().item<double>();
  const double logit_diff = (logits - expected).abs().max().item<double>();
  std::cout << "[ measured ] predictions agreeing with PIL's: " << agree * 100 << " %, max |logit difference| "
            << logit_diff << "\n";
  EXPECT_EQ(agree, 1.0);
}

// A folder of photos of many sizes (the ImageNet case) streams: each image is decoded and
// prepared on its own, at its own size. Against PyTorch running the same transform on tensors
// (torchvision's antialiased bicubic resize of the float image, clamped, centre crop, normalise:
// what the app computes, so the comparison can be exact; PIL's 8-bit resize is measured above),
// with a grey image among RGB ones. Then the analysis session: galleries show square tiles, and
// a cancelled extraction resumes where it stopped, since the folder's fingerprint is stable.
TEST(VisionBackbones, StreamedFolderOfMixedSizesMatchesPyTorchAndResumes) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + R"py(
import torchvision.transforms.functional as TF
model = clip_vit_with_head()
torch.save(model.state_dict(), "vit_clip.pth")
g = torch.Generator().manual_seed(7)
for k, (h, w) in enumerate([(40, 50), (37, 64), (90, 33), (32, 32), (51, 77), (64, 48), (35, 120)]):
    os.makedirs(f"img/{'ab'[k % 2]}", exist_ok=True)
    yy, xx = torch.linspace(0, 1, h)[:, None, None], torch.linspace(0, 1, w)[None, :, None]
    base = torch.rand(3, generator=g) * yy + torch.rand(3, generator=g) * xx
    img = Image.fromarray((base / base.max() * 200 + torch.rand(h, w, 3, generator=g) * 55).clamp(0, 255).to(torch.uint8).numpy(), "RGB")
    (img.convert("L") if k == 3 else img).save(f"img/{'ab'[k % 2]}/{k:02d}.png")
def tensor_transform(img):
    x = TF.pil_to_tensor(img).float() / 255
    x = TF.resize(x, math.floor(32 / 0.9), interpolation=BICUBIC, antialias=True).clamp(0, 1)
    return TF.normalize(TF.center_crop(x, 32), CLIP_MEAN, CLIP_STD)
save_expected(model, load_images("img", tensor_transform), "expected.pth")
)py");
  const auto streamed = run_app(dir.file("vit_clip.pth"), dir.file("img"), quickgelu());
  expect_matches_python(streamed, read_expected(dir.file("expected.pth")));

  analysis::SessionOptions options;
  options.model_path = dir.file("vit_clip.pth");
  options.data_spec = "folder:" + dir.file("img");
  options.cache_path = dir.file("cache.sqlite");
  options.chunk_size = 3;
  options.overrides = quickgelu();
  options.chunk_batching = analysis::kCommitEachChunk;  // quick chunks: the cancel must leave two to compute
  {
    auto session = analysis::AnalysisSession::open(options);
    EXPECT_THROW(session->extract([](const analysis::ExtractionProgress& p) { return p.chunks_done < 1; }), Cancelled);
  }
  auto session = analysis::AnalysisSession::open(options);
  const auto summary = session->extract();
  EXPECT_EQ(summary.chunks_reused, 1);
  EXPECT_EQ(summary.chunks_computed, 2);
  // Stored predictions are the model's.
  const auto predicted = streamed.logits.argmax(1).contiguous();
  EXPECT_EQ(session->run().predictions,
            std::vector<int64_t>(predicted.data_ptr<int64_t>(), predicted.data_ptr<int64_t>() + predicted.numel()));
  const auto tile = session->sample_image(4);  // b/01.png is 64×37: its centre square
  EXPECT_EQ(tile.height, 37);
  EXPECT_EQ(tile.width, 37);
  EXPECT_EQ(tile.channels, 3);

  // A file that cannot be decoded is named when extraction reaches it.
  testkit::write_bytes(dir.file("img/b/05.png"), "\x89PNG broken");
  auto broken = analysis::AnalysisSession::open(options);
  try {
    broken->extract();
    ADD_FAILURE() << "a corrupt image was not reported";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("05.png"), std::string::npos) << e.what();
  }
}

// Options remembered beside a user's .pth (the GUI's Model Options, `mumoe info --remember`):
// opened with no choices, the model is what they chose — features as PyTorch's QuickGELU model
// — and its analysis runs are keyed apart from the same bytes under another preset; a choice
// given explicitly still wins; forgetting restores the default.
TEST(VisionBackbones, RememberedOptionsOpenTheModelTheSameWayEverywhere) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + R"py(
model = clip_vit_with_head()
torch.save(model.state_dict(), "vit_clip.pth")
write_images("img", (35, 35), 2, 3)
save_expected(model, load_images("img", clip_transform()), "expected.pth")
)py");
  const auto pth = dir.file("vit_clip.pth");
  EXPECT_EQ(model::summarize_model_file(pth).backbone_preset, "vit_base_patch32_clip_224.openai");
  const auto sidecar = model::remember_open_options(pth, quickgelu());
  EXPECT_EQ(sidecar, pth + ".mumoe.json");
  EXPECT_EQ(model::summarize_model_file(pth).backbone_preset, "vit_base_patch32_clip_quickgelu_224.openai");
  expect_matches_python(run_app(pth, dir.file("img")), read_expected(dir.file("expected.pth")));

  // Explicit choices infer afresh, and the cache tells the two configurations apart.
  model::LayoutOverrides gelu;
  gelu.backbone_preset = "vit_base_patch32_clip_224.openai";
  EXPECT_EQ(model::summarize_model_file(pth, gelu).backbone_preset, "vit_base_patch32_clip_224.openai");
  const auto data = data::load_dataset("folder:" + dir.file("img"));
  const auto remembered = model::ClassifierModel::load(model::ModelFile::load(pth));
  const auto chosen = model::ClassifierModel::load(model::ModelFile::load(pth, gelu));
  const auto key = [&](const model::ClassifierModel& m) { return analysis::make_run_key(pth, m, data, {}); };
  EXPECT_EQ(key(remembered).model_hash, key(chosen).model_hash);
  EXPECT_NE(key(remembered).parameters, key(chosen).parameters);

  EXPECT_EQ(model::forget_open_options(pth), sidecar);
  EXPECT_FALSE(std::filesystem::exists(sidecar));
  EXPECT_EQ(model::forget_open_options(pth), "");
  EXPECT_EQ(model::summarize_model_file(pth).backbone_preset, "vit_base_patch32_clip_224.openai");
}

// A training script's checkpoint with two state dicts ({"model": …, "ema": …}) needs --key; the
// chosen key is remembered with the other options, so the file then opens with nothing else.
TEST(VisionBackbones, RememberedOptionsKeepTheCheckpointKey) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + R"py(
torch.manual_seed(1)
model, ema = clip_vit_with_head(), clip_vit_with_head()
torch.save({"model": model.state_dict(), "ema": ema.state_dict(), "epoch": 9}, "two.pth")
torch.save({"head": ema.state_dict()["1.MuMoE.factors.2"]}, "ema_factor.pth")
)py");
  const auto pth = dir.file("two.pth");
  EXPECT_THROW(model::ModelFile::load(pth), FileError);  // ambiguous: which state dict?
  model::LayoutOverrides ema;
  ema.checkpoint_key = "ema";
  ema.backbone_preset = "vit_base_patch32_clip_quickgelu_224.openai";
  model::remember_open_options(pth, ema);
  const auto file = model::ModelFile::load(pth);
  EXPECT_EQ(file.state_dict_key(), "ema");
  EXPECT_EQ(model::summarize_model_file(pth).backbone_preset, "vit_base_patch32_clip_quickgelu_224.openai");
  const auto wanted = read_expected(dir.file("ema_factor.pth")).at("head");
  EXPECT_TRUE(file.read_tensor("1.MuMoE.factors.2").equal(wanted));
  // A key given now still wins.
  model::LayoutOverrides chosen;
  chosen.checkpoint_key = "model";
  EXPECT_EQ(model::ModelFile::load(pth, chosen).state_dict_key(), "model");
  // Remembering other choices later keeps the key (the dialog shows it, and so does the sidecar).
  model::LayoutOverrides names;
  names.label_names = {"a", "b", "c", "d", "e"};
  model::remember_open_options(pth, names);
  EXPECT_EQ(model::read_remembered_options(pth)->checkpoint_key, "ema");
  EXPECT_EQ(model::ModelFile::load(pth).state_dict_key(), "ema");
  EXPECT_EQ(model::ModelFile::load(pth).manifest().label_names.at(4), "e");
}

TEST(VisionBackbones, ExportedEditsLoadIntoTheUsersModelWithStrictTrue) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + R"py(
model = clip_vit_with_head()
torch.save({"model": model.state_dict(), "epoch": 3}, "vit_clip.pth")   # a training script's checkpoint
write_images("img", (35, 35), 3, 5)
save_expected(model, load_images("img", clip_transform()), "expected.pth")
)py");
  editing::LogitEdit edit;
  edit.target = "2";
  edit.output = 2;
  edit.mean_coefficients = {0.5, 0.1, 0.0, 0.2, 0.1, 0.1};
  edit.lambda = 3.5;
  const auto source = model::ModelFile::load(dir.file("vit_clip.pth"), quickgelu());
  const auto data = data::load_dataset("folder:" + dir.file("img"));
  editing::ExportRequest request;
  request.output = dir.file("edited.pth");
  const auto report = editing::export_edited_model(source, {edit}, data, request);
  EXPECT_EQ(report.layout, editing::ExportLayout::Source);
  EXPECT_LE(report.max_abs_difference, 1e-5);
  ASSERT_TRUE(std::filesystem::exists(model::manifest_sidecar_path(dir.file("edited.pth"))));

  // The user's own script: the same model class, the rank the export reports, strict=True.
  run_python(dir, testkit::reference_models() + R"py(
state = torch.load("edited.pth")["model"]   # nested as the source was
rank = state["1.MuMoE.factors.0"].shape[1]
model = clip_vit_with_head(rank)
model.load_state_dict(state, strict=True)
save_expected(model, load_images("img", clip_transform()), "edited_expected.pth")
)py");
  // Python's edited logits are Python's unedited ones plus λ·āᵀa on output 2 (spec §5)...
  const auto before = read_expected(dir.file("expected.pth"));
  const auto after = read_expected(dir.file("edited_expected.pth"));
  auto wanted = before.at("logits").clone();
  const auto abar = torch::tensor(edit.mean_coefficients, torch::kFloat32);
  wanted.select(1, 2).add_(edit.lambda * before.at("coefficients").matmul(abar));
  expect_close(after.at("logits"), wanted, "Python's logits of the exported model");
  // ... and the app reopens its export (preset from the sidecar) with the same outputs.
  expect_matches_python(run_app(dir.file("edited.pth"), dir.file("img")), after);

  // Edited again, it stays in the user's layout (auto → source), and a checkpoint re-saved since
  // is no longer described by the old sidecar: it is inferred afresh (default preset).
  request.output = dir.file("edited_twice.pth");
  const auto again = model::ModelFile::load(dir.file("edited.pth"));
  EXPECT_EQ(editing::export_edited_model(again, {edit}, data, request).layout, editing::ExportLayout::Source);
  const auto sidecar_bytes = nlohmann::json::parse(testkit::read_bytes(model::manifest_sidecar_path(dir.file("edited.pth"))))
                                 .at("model_file_bytes")
                                 .get<uint64_t>();
  run_python(dir, "d = torch.load('edited.pth'); d['note'] = 'fine-tuned further'; torch.save(d, 'edited.pth')\n");
  ASSERT_NE(std::filesystem::file_size(dir.file("edited.pth")), sidecar_bytes);
  EXPECT_TRUE(model::ModelFile::load(dir.file("edited.pth")).inferred());
}

TEST(VisionBackbones, PartlyRecognisedBackbonesOpenAsTheirBareLayers) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  // A CIFAR-style ResNet (3×3 stem) is not torchvision's: its head opens as a bare μMoE layer.
  run_python(dir, testkit::reference_models() + R"py(
model = torchvision.models.resnet18()
model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
model.fc = MuMoE(512, 6, 8, 16)
torch.save(model.state_dict(), "cifar_resnet.pth")
)py");
  const auto summary = model::summarize_model_file(dir.file("cifar_resnet.pth"));
  EXPECT_EQ(summary.architecture, "pytorch-state-dict");
  ASSERT_EQ(summary.layers.size(), 1u);
  EXPECT_EQ(summary.layers[0].prefix, "fc.");
  // Asking for a backbone makes the mismatch an error that says what is wrong.
  model::LayoutOverrides resnet;
  resnet.backbone_preset = "resnet";
  try {
    model::ModelFile::load(dir.file("cifar_resnet.pth"), resnet);
    ADD_FAILURE() << "a 3×3 stem passed as torchvision's";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("7×7 stem"), std::string::npos) << e.what();
  }
}

// Any backbone through TorchScript: the three lines of Python in the README (trace, save, save the
// head), then --backbone FILE.pt with the head file.
TEST(VisionBackbones, TorchScriptBackboneWithAMumoeHeadMatchesPyTorch) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  // The "imagenet" preset at 64 px resizes to floor(64 / 0.875) = 73: 73 px images keep their size.
  run_python(dir, testkit::reference_models() + R"py(
backbone = torchvision.models.resnet18()
for m in backbone.modules():
    if isinstance(m, nn.BatchNorm2d):
        m.running_mean.normal_(0, 0.1); m.running_var.uniform_(0.5, 1.5)
backbone.fc = nn.Identity()
backbone.eval()
torch.jit.trace(backbone, torch.randn(1, 3, 64, 64)).save("backbone.pt")
head = MuMoE(512, 4, 6, 8).eval()
torch.save(head.state_dict(), "head.pth")
write_images("img", (73, 73), 2, 6)
save_expected(nn.Sequential(backbone, head), load_images("img", eval_transform(64, 0.875, BICUBIC, IMAGENET_MEAN, IMAGENET_STD)), "expected.pth")
data = open("backbone.pt", "rb").read()
open("truncated.pt", "wb").write(data[: len(data) // 2])
torch.save(MuMoE(256, 4, 6, 8).state_dict(), "narrow_head.pth")
class Pool(nn.Module):   # a backbone of width 3 that returns float64, or NaN
    def __init__(s, nan): super().__init__(); s.nan = nan
    def forward(s, x): return (x.mean((2, 3)) * (float("nan") if s.nan else 1.0)).double()
torch.jit.trace(Pool(False), torch.randn(1, 3, 64, 64)).save("double.pt")
torch.jit.trace(Pool(True), torch.randn(1, 3, 64, 64)).save("nan.pt")
torch.save(MuMoE(3, 4, 6, 2).state_dict(), "small_head.pth")
)py");
  model::LayoutOverrides o;
  o.torchscript_backbone = dir.file("backbone.pt");
  o.image_size = 64;
  const auto summary = model::summarize_model_file(dir.file("head.pth"), o);
  EXPECT_EQ(summary.architecture, "image-classifier");
  EXPECT_EQ(summary.backbone_preset, "imagenet");
  expect_matches_python(run_app(dir.file("head.pth"), dir.file("img"), o), read_expected(dir.file("expected.pth")));

  auto expect_backbone_error = [&](const std::string& head, const std::string& backbone, const std::string& phrase) {
    model::LayoutOverrides bad = o;
    bad.torchscript_backbone = dir.file(backbone);
    try {
      model::ClassifierModel::load(model::ModelFile::load(dir.file(head), bad));
      ADD_FAILURE() << "no error for " << backbone;
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(backbone), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  expect_backbone_error("head.pth", "truncated.pt", "not a readable TorchScript archive");
  expect_backbone_error("head.pth", "missing.pt", "missing.pt");
  expect_backbone_error("narrow_head.pth", "backbone.pt", "expected [1, 256]");
  // A backbone that returns NaN is refused by name at load; one that returns float64 gives every
  // caller float32 features (evaluate and analyze used to treat the two dtypes differently).
  expect_backbone_error("small_head.pth", "nan.pt", "non-finite features");
  model::LayoutOverrides double_backbone = o;
  double_backbone.torchscript_backbone = dir.file("double.pt");
  auto classifier = model::ClassifierModel::load(model::ModelFile::load(dir.file("small_head.pth"), double_backbone));
  const auto data = data::load_dataset("folder:" + dir.file("img"));
  EXPECT_EQ(classifier.layer_inputs(data, 0, data.size()).scalar_type(), torch::kFloat32);
  torch::NoGradGuard no_grad;
  const auto out = classifier.forward(data, torch::arange(data.size()), torch::kCPU);
  EXPECT_EQ(out.output.scalar_type(), torch::kFloat32);
  EXPECT_EQ(out.output.size(1), 4);
}

TEST(VisionBackbones, ATimmModelWithItsOwnClassifierIsRefusedNamingTheTensor) {
  REQUIRE_PYTHON("torch torchvision PIL");
  TempDir dir;
  run_python(dir, testkit::reference_models() + R"py(
vit = ViT(32, 8, 128, 1, 2, clip=False)
vit.head = nn.Linear(128, 10)   # timm num_classes=10: not a feature extractor
torch.save(nn.Sequential(vit, MuMoE(128, 4, 5, 8)).state_dict(), "with_head.pth")
)py");
  const auto file = model::ModelFile::load(dir.file("with_head.pth"));
  try {
    model::ClassifierModel::load(file);
    ADD_FAILURE() << "a ViT with its own head loaded";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("0.head.weight"), std::string::npos) << e.what();
  }
  model::LayoutOverrides unknown;
  unknown.backbone_preset = "vit_huge";
  EXPECT_THROW(model::ModelFile::load(dir.file("with_head.pth"), unknown), UsageError);
  model::LayoutOverrides resnet;
  resnet.backbone_preset = "resnet";
  EXPECT_THROW(model::ModelFile::load(dir.file("with_head.pth"), resnet), UsageError);
}

}  // namespace
