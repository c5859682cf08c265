// The analyses' copies of a user's layer (nn::copy_block, nn::copy_moe_layer): built without
// random draws (nn::SkipRandomInitialisation, module_state.h: the generator is not advanced) and
// then given the source's tensors (nn::replace_state_for_eval), so every parameter and buffer must
// equal the source's exactly — in the source's dtype and widened to float64 — and the copy must be
// in eval mode. Each case has its own seed, so memory a previous case freed cannot hold the
// expected values. The scope is per thread and nests; layers built outside it still draw.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

#include "nn/moe_layer.h"
#include "nn/module_state.h"
#include "nn/mumoe_block.h"

using namespace mumoe;

namespace module_copies_test {

// Every named parameter and buffer of `copy` equals `source`'s converted to the copy's dtype
// (float32 → float64 is exact), and `copy` has no tensor `source` lacks.
void expect_same_state(const torch::nn::Module& source, const torch::nn::Module& copy, torch::Dtype dtype) {
  const auto params = source.named_parameters();
  const auto copied = copy.named_parameters();
  ASSERT_EQ(copied.size(), params.size());
  for (const auto& p : copied) {
    SCOPED_TRACE(p.key());
    EXPECT_EQ(p.value().scalar_type(), dtype);
    EXPECT_TRUE(torch::equal(p.value(), params[p.key()].to(dtype)));
  }
  const auto buffers = source.named_buffers();
  const auto copied_buffers = copy.named_buffers();
  ASSERT_EQ(copied_buffers.size(), buffers.size());
  for (const auto& b : copied_buffers) {
    SCOPED_TRACE(b.key());
    EXPECT_TRUE(torch::equal(b.value().to(torch::kFloat64), buffers[b.key()].to(torch::kFloat64)));
  }
  EXPECT_FALSE(copy.is_training());
}

// A layer whose every tensor differs from any initialisation: parameters and buffers (BatchNorm's
// running statistics) set from a seeded generator.
template <typename Module>
void scramble(Module& m, uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& p : m.parameters()) p.copy_(torch::randn_like(p) * 3 + 0.5);
  for (auto& b : m.buffers())
    if (b.is_floating_point()) b.copy_(torch::rand_like(b) + 0.25);  // running var stays positive
    else b.fill_(7);                                                  // num_batches_tracked
}

nn::LayerConfig block_config(nn::Factorization factorization, bool two_layers, nn::GateNorm norm) {
  nn::LayerConfig c;
  c.factorization = factorization;
  c.input_dim = 6;
  c.output_dim = two_layers ? 9 : 4;
  c.second_dim = two_layers ? 6 : 0;
  c.expert_dims = {5, 3};
  if (factorization == nn::Factorization::CP) c.cp_rank = 7;
  else c.tr_ranks = {2, 3, 4, 2};
  c.use_bias = true;
  c.gate_norm = norm;
  c.input_layer_norm = two_layers;
  c.validate();
  return c;
}

// A small router layer: 3 GELU experts of hidden width 5 on 6 → 4, groups of 4 tokens.
nn::MoELayerConfig router_config(nn::RouterKind router) {
  nn::MoELayerConfig c;
  c.router = router;
  c.input_dim = 6;
  c.output_dim = 4;
  c.hidden_dim = 5;
  c.experts = 3;
  c.group_size = 4;
  return c;
}

TEST(ModuleCopies, SkipRandomInitialisationIsPerThreadAndNests) {
  EXPECT_FALSE(nn::SkipRandomInitialisation::active());
  {
    const nn::SkipRandomInitialisation outer;
    EXPECT_TRUE(nn::SkipRandomInitialisation::active());
    bool other = true;
    std::thread([&] { other = nn::SkipRandomInitialisation::active(); }).join();
    EXPECT_FALSE(other);
    {
      const nn::SkipRandomInitialisation inner;
      EXPECT_TRUE(nn::SkipRandomInitialisation::active());
    }
    EXPECT_TRUE(nn::SkipRandomInitialisation::active());  // the inner scope restores, not clears
  }
  EXPECT_FALSE(nn::SkipRandomInitialisation::active());
}

TEST(ModuleCopies, BlockCopiesEqualTheSourceInEveryParameterAndBuffer) {
  uint64_t seed = 100;
  for (auto factorization : {nn::Factorization::CP, nn::Factorization::TR})
    for (bool two_layers : {false, true})
      for (auto norm : {nn::GateNorm::BatchNorm, nn::GateNorm::LayerNorm}) {
        SCOPED_TRACE(nn::to_string(factorization) + (two_layers ? " block" : " layer") + " " + nn::to_string(norm));
        nn::MuMoEBlock source(block_config(factorization, two_layers, norm));
        source->train();  // the copy is put in eval mode whatever the source's mode
        for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
          scramble(*source, ++seed);
          auto copy = nn::copy_block(source, dtype, torch::kCPU);
          expect_same_state(*source, *copy, dtype);
          // And it computes: the same coefficients as the source in eval mode.
          source->eval();
          const auto x = torch::randn({8, 6});
          const auto a = source->coefficients(x);
          const auto b = copy->coefficients(x.to(dtype));
          for (size_t e = 0; e < a.size(); ++e) EXPECT_TRUE(torch::allclose(a[e].to(torch::kFloat64), b[e].to(torch::kFloat64), 1e-5, 1e-6));
          source->train();
        }
        EXPECT_TRUE(source->is_training());  // the source's mode is left alone
      }
}

TEST(ModuleCopies, RouterLayerCopiesEqualTheSource) {
  uint64_t seed = 200;
  for (auto router : {nn::RouterKind::SoftmaxTokenChoice, nn::RouterKind::SoftMoE}) {
    nn::MoELayer source(router_config(router));
    for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
      scramble(*source, ++seed);
      expect_same_state(*source, *nn::copy_moe_layer(source, dtype, torch::kCPU), dtype);
    }
  }
}

TEST(ModuleCopies, CopiesDoNotAdvanceTheRandomGenerator) {
  // A layer built inside the scope draws nothing: the generator's next numbers are those right
  // after seeding. (Without the scope the copy's construction would draw its factors first.)
  nn::MuMoEBlock block(block_config(nn::Factorization::CP, true, nn::GateNorm::LayerNorm));
  nn::MoELayer router(router_config(nn::RouterKind::SoftmaxTokenChoice));
  torch::manual_seed(5);
  const auto expected = torch::randn({4});
  torch::manual_seed(5);
  (void)nn::copy_block(block, torch::kFloat64, torch::kCPU);
  (void)nn::copy_moe_layer(router, torch::kFloat64, torch::kCPU);
  EXPECT_TRUE(torch::equal(torch::randn({4}), expected));
}

TEST(ModuleCopies, CopyStateOverwritesEveryTensorOfTheTarget) {
  // copy_state_for_eval into a target whose every tensor is NaN: nothing of it may survive.
  nn::MuMoEBlock source(block_config(nn::Factorization::TR, true, nn::GateNorm::BatchNorm));
  scramble(*source, 7);
  nn::MuMoEBlock target(block_config(nn::Factorization::TR, true, nn::GateNorm::BatchNorm));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : target->parameters()) p.fill_(std::numeric_limits<double>::quiet_NaN());
    for (auto& b : target->buffers())
      if (b.is_floating_point()) b.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  nn::copy_state_for_eval(*source, *target);
  expect_same_state(*source, *target, torch::kFloat32);
}

TEST(ModuleCopies, ReplacingStateFromALayerOfAnotherShapeThrowsNamingTheTensor) {
  auto other = block_config(nn::Factorization::CP, false, nn::GateNorm::BatchNorm);
  other.cp_rank = 3;
  nn::MuMoEBlock source(other);
  nn::MuMoEBlock target(block_config(nn::Factorization::CP, false, nn::GateNorm::BatchNorm));
  try {
    nn::replace_state_for_eval(*source, *target, torch::kFloat64, torch::kCPU);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("MuMoE.factors"), std::string::npos) << e.what();
  }
}

TEST(ModuleCopies, LayersBuiltOutsideTheScopeStillDrawTheirInitialisation) {
  {
    const nn::SkipRandomInitialisation scope;
    nn::MuMoEBlock skipped(block_config(nn::Factorization::CP, false, nn::GateNorm::BatchNorm));
    (void)skipped;  // its factors are whatever the allocator held: not inspected
  }
  torch::manual_seed(3);
  nn::MuMoEBlock drawn(block_config(nn::Factorization::CP, false, nn::GateNorm::BatchNorm));
  torch::manual_seed(3);
  nn::MuMoEBlock again(block_config(nn::Factorization::CP, false, nn::GateNorm::BatchNorm));
  const auto a = drawn->first_layer()->factors(), b = again->first_layer()->factors();
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(torch::equal(a[k], b[k])) << "factor " << k;
  // The first expert factor is N(1, 1) (multilinear_layer.cpp): a seeded draw, not zeros or a copy.
  EXPECT_NEAR(a[0].mean().item<double>(), 1.0, 0.8);
  EXPECT_GT(a[0].std().item<double>(), 0.3);
  // The second input factor of a CP layer: U(−1/√(I+1), 1/√(I+1)), not constant.
  EXPECT_GT(a[2].std().item<double>(), 0.0);
}

}  // namespace module_copies_test
