// The LibTorch core on a GPU: every layer kind, the router layers, the image classifiers (small
// CNN, ViT, ResNet) and the GPT give on CUDA what they give on the CPU. Both sides run in
// float64, so the only difference left is the order of summation (relative error ≤ 1e-10); the
// CPU side is itself checked against the materialised formula and real PyTorch elsewhere.
// Where the machine has no CUDA (CI), the comparisons skip; the refusals of parse_device run
// everywhere. scripts/gpu-check.sh builds and runs these on a GPU machine.
// MUMOE_TEST_CUDA_STAND_IN=cpu runs the comparisons with a second CPU copy in the GPU's place:
// a check of the tests themselves (configurations, copies) on a machine without a GPU, never a
// substitute for the GPU run.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "io/errors.h"
#include "nn/device.h"
#include "nn/image_classifier.h"
#include "nn/moe_layer.h"
#include "nn/mumoe_block.h"
#include "nn/mumoe_gpt.h"
#include "reference_math.h"

using namespace mumoe;

namespace {

bool cpu_stands_in_for_cuda() {
  const char* stand_in = std::getenv("MUMOE_TEST_CUDA_STAND_IN");
  return !torch::cuda::is_available() && stand_in && std::string(stand_in) == "cpu";
}

#define REQUIRE_CUDA()                                                  \
  if (!torch::cuda::is_available() && !cpu_stands_in_for_cuda()) \
  GTEST_SKIP() << "no CUDA device on this machine"

torch::Device gpu_device() {
  return cpu_stands_in_for_cuda() ? torch::Device(torch::kCPU) : torch::Device(torch::kCUDA, 0);
}

// The float64 module `cpu_module` on the GPU: a new Holder(args...) given its parameters and
// buffers by name, moved to the GPU, in eval mode.
template <typename Holder, typename... Args>
Holder gpu_twin(const Holder& cpu_module, Args&&... args) {
  Holder gpu_module(std::forward<Args>(args)...);
  gpu_module->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  auto source = cpu_module->named_parameters(true);
  for (auto& p : gpu_module->named_parameters(true)) p.value().copy_(source[p.key()]);
  auto source_buffers = cpu_module->named_buffers(true);
  for (auto& b : gpu_module->named_buffers(true)) b.value().copy_(source_buffers[b.key()]);
  gpu_module->to(gpu_device());
  gpu_module->eval();
  return gpu_module;
}

double cuda_vs_cpu_error(const torch::Tensor& on_gpu, const torch::Tensor& on_cpu) {
  EXPECT_EQ(on_gpu.device(), gpu_device());
  return testkit::relative_error(on_gpu.cpu(), on_cpu);
}

nn::LayerConfig cuda_case_layer(nn::Factorization f, std::vector<int64_t> experts) {
  nn::LayerConfig c;
  c.factorization = f;
  c.input_dim = 7;
  c.output_dim = 5;
  c.expert_dims = std::move(experts);
  c.cp_rank = 4;
  if (f == nn::Factorization::TR) c.tr_ranks.assign(c.expert_dims.size() + 2, 3);
  return c;
}

}  // namespace

TEST(CudaDevice, ParseDeviceRefusesWhatTheMachineCannotDo) {
  EXPECT_TRUE(nn::parse_device("cpu").is_cpu());
  EXPECT_THROW(nn::parse_device("gpu"), UsageError);
  EXPECT_THROW(nn::parse_device("cuda:x"), UsageError);
  if (!torch::cuda::is_available()) {
    try {
      nn::parse_device("cuda");
      ADD_FAILURE() << "cuda accepted on a machine without CUDA";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA is not available"), std::string::npos) << e.what();
    }
    return;
  }
  EXPECT_TRUE(nn::parse_device("cuda").is_cuda());
  EXPECT_EQ(nn::parse_device("cuda:0").index(), 0);
  // A GPU the machine does not have is a usage error now, not a CUDA failure later.
  const auto missing = "cuda:" + std::to_string(torch::cuda::device_count());
  try {
    nn::parse_device(missing);
    ADD_FAILURE() << missing << " accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

TEST(CudaDevice, EveryLayerKindGivesTheCpusOutputAndCoefficients) {
  REQUIRE_CUDA();
  std::vector<std::pair<std::string, nn::LayerConfig>> layers = {
      {"CP entmax15", cuda_case_layer(nn::Factorization::CP, {9})},
      {"CP hierarchical", cuda_case_layer(nn::Factorization::CP, {4, 3})},
      {"TR", cuda_case_layer(nn::Factorization::TR, {6})},
      {"TR hierarchical", cuda_case_layer(nn::Factorization::TR, {3, 4})},
  };
  auto softmax = cuda_case_layer(nn::Factorization::CP, {8});
  softmax.gate_activation = nn::GateActivationKind::Softmax;
  softmax.gate_norm = nn::GateNorm::None;
  layers.push_back({"CP softmax", softmax});
  auto block = cuda_case_layer(nn::Factorization::CP, {6});
  block.second_dim = 4;
  block.gate_norm = nn::GateNorm::LayerNorm;
  block.input_layer_norm = true;
  layers.push_back({"two-layer block, LayerNorm", block});

  for (const auto& [name, config] : layers) {
    SCOPED_TRACE(name);
    nn::MuMoEBlock cpu(config);
    cpu->to(torch::kFloat64);
    testkit::randomize(cpu, 11);
    cpu->eval();
    auto gpu = gpu_twin(cpu, config);
    torch::NoGradGuard no_grad;
    const auto x = torch::randn({33, config.input_dim}, torch::kFloat64);
    const auto want = cpu->forward(x);
    const auto got = gpu->forward(x.to(gpu_device()));
    EXPECT_LE(cuda_vs_cpu_error(got.output, want.output), 1e-10);
    ASSERT_EQ(got.coefficients.size(), want.coefficients.size());
    for (size_t e = 0; e < want.coefficients.size(); ++e)
      EXPECT_LE((got.coefficients[e].cpu() - want.coefficients[e]).abs().max().item<double>(), 1e-12);
    // An ablated expert is removed on the GPU as on the CPU.
    const auto ablation = nn::ExpertAblation::first_mode({1, 2});
    EXPECT_LE(cuda_vs_cpu_error(gpu->forward(x.to(gpu_device()), ablation).output, cpu->forward(x, ablation).output), 1e-10);
  }
}

TEST(CudaDevice, RouterLayersRouteAndComputeAsOnTheCpu) {
  REQUIRE_CUDA();
  for (const auto kind : {nn::RouterKind::SoftmaxTokenChoice, nn::RouterKind::SinkhornTokenChoice,
                          nn::RouterKind::SoftmaxExpertChoice, nn::RouterKind::SoftMoE}) {
    SCOPED_TRACE(nn::to_string(kind));
    nn::MoELayerConfig c;
    c.router = kind;
    c.input_dim = 6;
    c.hidden_dim = 8;
    c.output_dim = 3;
    c.experts = 4;
    c.k = kind == nn::RouterKind::SinkhornTokenChoice ? 2 : 1;
    torch::manual_seed(3);
    nn::MoELayer cpu(c);
    cpu->to(torch::kFloat64);
    cpu->eval();
    auto gpu = gpu_twin(cpu, c);
    torch::NoGradGuard no_grad;
    const auto x = torch::randn({2, 10, 6}, torch::kFloat64);
    const auto want = cpu->forward(x);
    const auto got = gpu->forward(x.to(gpu_device()));
    EXPECT_LE(cuda_vs_cpu_error(got.output, want.output), 1e-10);
    EXPECT_LE((got.coefficients.cpu() - want.coefficients).abs().max().item<double>(), 1e-12);
    EXPECT_EQ(got.dropped_tokens, want.dropped_tokens);
    EXPECT_LE(cuda_vs_cpu_error(gpu->forward(x.to(gpu_device()), {2}).output, cpu->forward(x, {2}).output), 1e-10);
  }
}

TEST(CudaDevice, ImageClassifiersGiveTheCpusLogits) {
  REQUIRE_CUDA();
  nn::LayerConfig head = cuda_case_layer(nn::Factorization::CP, {6});
  std::vector<std::pair<std::string, nn::BackboneConfig>> backbones;
  nn::BackboneConfig cnn;
  cnn.image_size = 12;
  cnn.channels1 = 4;
  cnn.channels2 = 5;
  cnn.feature_dim = 7;
  backbones.push_back({"small CNN", cnn});
  nn::BackboneConfig vit;
  vit.kind = nn::BackboneKind::VisionTransformer;
  vit.in_channels = 3;
  vit.image_size = 8;
  vit.feature_dim = 12;
  vit.vit.patch_size = 4;
  vit.vit.width = 12;
  vit.vit.depth = 2;
  vit.vit.heads = 2;
  vit.vit.mlp_dim = 20;
  backbones.push_back({"ViT", vit});
  nn::BackboneConfig resnet;
  resnet.kind = nn::BackboneKind::ResNet;
  resnet.in_channels = 3;
  resnet.image_size = 16;
  resnet.feature_dim = 512;
  resnet.resnet.blocks = {1, 1, 1, 1};
  backbones.push_back({"ResNet", resnet});

  for (const auto& [name, backbone] : backbones) {
    SCOPED_TRACE(name);
    auto layer = head;
    layer.input_dim = backbone.feature_dim;
    torch::manual_seed(8);
    nn::ImageClassifier cpu(backbone, layer);
    cpu->to(torch::kFloat64);
    {
      torch::NoGradGuard no_grad;  // BatchNorm statistics that are not the identity
      for (auto& b : cpu->named_buffers(true))
        if (b.key().find("running_var") != std::string::npos) b.value().uniform_(0.5, 2.0);
        else if (b.key().find("running_mean") != std::string::npos) b.value().normal_(0.0, 0.3);
    }
    cpu->eval();
    auto gpu = gpu_twin(cpu, backbone, layer);
    torch::NoGradGuard no_grad;
    const auto images =
        torch::rand({5, backbone.in_channels, backbone.image_size, backbone.image_size}, torch::kFloat64);
    const auto want = cpu->forward(images);
    const auto got = gpu->forward(images.to(gpu_device()));
    EXPECT_LE(cuda_vs_cpu_error(got.output, want.output), 1e-10);
    EXPECT_LE((got.coefficients[0].cpu() - want.coefficients[0]).abs().max().item<double>(), 1e-12);
  }
}

TEST(CudaDevice, GptGivesTheCpusLogitsAndCoefficients) {
  REQUIRE_CUDA();
  nn::GptConfig c;
  c.vocab_size = 13;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.experts = 5;
  c.cp_rank = 6;
  torch::manual_seed(21);
  nn::MuMoEGpt cpu(c);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : cpu->named_parameters()) p.value().normal_(0.0, 0.5);
  }
  cpu->to(torch::kFloat64);
  cpu->eval();
  auto gpu = gpu_twin(cpu, c);
  torch::NoGradGuard no_grad;
  const auto tokens = torch::randint(0, c.vocab_size, {3, 8}, torch::kLong);
  const std::vector<nn::ExpertAblation> ablation = {{}, nn::ExpertAblation::first_mode({0, 3})};
  const auto want = cpu->forward(tokens, ablation);
  const auto got = gpu->forward(tokens.to(gpu_device()), ablation);
  EXPECT_LE(cuda_vs_cpu_error(got.logits, want.logits), 1e-10);
  ASSERT_EQ(got.coefficients.size(), want.coefficients.size());
  for (size_t l = 0; l < want.coefficients.size(); ++l)
    EXPECT_LE((got.coefficients[l].cpu() - want.coefficients[l]).abs().max().item<double>(), 1e-12);
}

// A training step on the GPU moves the parameters as the CPU's does (float64, same data order).
TEST(CudaDevice, ATrainingStepUpdatesTheParametersAsOnTheCpu) {
  REQUIRE_CUDA();
  auto config = cuda_case_layer(nn::Factorization::CP, {6});
  nn::MuMoEBlock cpu(config);
  cpu->to(torch::kFloat64);
  testkit::randomize(cpu, 5);
  cpu->train();
  auto gpu = gpu_twin(cpu, config);
  gpu->train();
  const auto x = torch::randn({16, config.input_dim}, torch::kFloat64);
  const auto labels = torch::randint(0, config.output_dim, {16}, torch::kLong);
  torch::optim::Adam cpu_opt(cpu->parameters(), 1e-2);
  torch::optim::Adam gpu_opt(gpu->parameters(), 1e-2);
  for (int step = 0; step < 3; ++step) {
    cpu_opt.zero_grad();
    torch::nn::functional::cross_entropy(cpu->forward(x).output, labels).backward();
    cpu_opt.step();
    gpu_opt.zero_grad();
    torch::nn::functional::cross_entropy(gpu->forward(x.to(gpu_device())).output, labels.to(gpu_device())).backward();
    gpu_opt.step();
  }
  auto gpu_params = gpu->named_parameters();
  for (const auto& p : cpu->named_parameters()) {
    SCOPED_TRACE(p.key());
    EXPECT_LE(cuda_vs_cpu_error(gpu_params[p.key()], p.value()), 1e-9);
  }
}
