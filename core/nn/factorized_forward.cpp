#include "nn/factorized_forward.h"

#include <torch/torch.h>

namespace mumoe::nn {
namespace {

// Batched mode-2 product of a core F [Ra, D, Rb] with rows v [M, D]: [M, Ra, Rb].
// Done as one matrix product (v @ F viewed as [D, Ra·Rb]) instead of an einsum so the
// intermediate is exactly M·Ra·Rb.
torch::Tensor mode2_product(const torch::Tensor& core, const torch::Tensor& rows) {
  const auto ra = core.size(0), d = core.size(1), rb = core.size(2);
  auto flat = core.permute({1, 0, 2}).reshape({d, ra * rb});
  return rows.matmul(flat).view({rows.size(0), ra, rb});
}

}  // namespace

torch::Tensor with_bias_column(const torch::Tensor& z) {
  return torch::cat({z, torch::ones({z.size(0), 1}, z.options())}, 1);
}

torch::Tensor cp_forward(const std::vector<torch::Tensor>& factors,
                         const std::vector<torch::Tensor>& coefficients, const torch::Tensor& z) {
  // (cp_forward_from_input_side checks the factor count against the modes.)
  return cp_forward_from_input_side(factors, coefficients, cp_input_side(factors, z));
}

torch::Tensor cp_input_side(const std::vector<torch::Tensor>& factors, const torch::Tensor& z) {
  TORCH_CHECK(factors.size() >= 3, "cp_input_side: expected at least 3 factors");
  return z.matmul(factors[factors.size() - 2]);  // [M, R]
}

torch::Tensor cp_input_side_of(const torch::Tensor& input_factor, const torch::Tensor& z, bool use_bias) {
  if (!use_bias) return z.matmul(input_factor);
  const int64_t inputs = z.size(-1);
  TORCH_CHECK(input_factor.size(0) == inputs + 1, "cp_input_side_of: the input factor has ", input_factor.size(0),
              " rows, not ", inputs, " + 1 (the bias row)");
  return torch::addmm(input_factor.select(0, inputs), z, input_factor.narrow(0, 0, inputs));
}

torch::Tensor cp_forward_from_input_side(const std::vector<torch::Tensor>& factors,
                                         const std::vector<torch::Tensor>& coefficients,
                                         const torch::Tensor& input_side) {
  const size_t modes = coefficients.size();
  TORCH_CHECK(factors.size() == modes + 2, "cp_forward_from_input_side: expected ", modes + 2, " factors");
  auto hidden = input_side;
  for (size_t e = 0; e < modes; ++e) hidden = hidden * coefficients[e].matmul(factors[e]);
  return hidden.matmul(factors[modes + 1].t());  // [M, O]
}

torch::Tensor tr_forward(const std::vector<torch::Tensor>& factors,
                         const std::vector<torch::Tensor>& coefficients, const torch::Tensor& z) {
  const size_t modes = coefficients.size();
  TORCH_CHECK(factors.size() == modes + 2, "tr_forward: expected ", modes + 2, " factors");
  auto chain = mode2_product(factors[0], coefficients[0]);  // [M, R1, R2]
  for (size_t e = 1; e < modes; ++e) chain = chain.bmm(mode2_product(factors[e], coefficients[e]));
  chain = chain.bmm(mode2_product(factors[modes], z));  // [M, R1, R_last]
  const auto& out = factors[modes + 1];                 // [R_last, O, R1]
  const auto r_last = out.size(0), o = out.size(1), r1 = out.size(2);
  auto out_flat = out.permute({2, 0, 1}).reshape({r1 * r_last, o});
  return chain.reshape({chain.size(0), r1 * r_last}).matmul(out_flat);
}

}  // namespace mumoe::nn
