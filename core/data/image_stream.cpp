#include "data/image_stream.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <vector>

#include "io/blas_threads.h"
#include "nn/cpu_team.h"

namespace mumoe::data {

torch::Tensor decode_images(const ImageStream& stream, const torch::Tensor& indices, const ImageTransform& transform) {
  const auto index = indices.to(torch::kLong).contiguous();
  const auto* samples = index.data_ptr<int64_t>();
  const int64_t n = index.numel();
  std::vector<torch::Tensor> out(static_cast<size_t>(n));
  // One image per work item: decoding a JPEG and resizing it is milliseconds, far above the
  // scheduling cost, and images differ in size. Torch ops inside the region run single-threaded
  // (LibTorch does not nest intra-op parallelism), so each thread works on its own images. On a
  // thread per core (nn/cpu_team.h): no matrix products here to leave cores to.
  const io::OpenMpTeam team(nn::per_core_openmp_team());
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) out[static_cast<size_t>(k)] = transform(stream.image(samples[k]), samples[k]);
  });
  if (out.empty()) return torch::empty({0});
  return torch::stack(out);
}

}  // namespace mumoe::data
