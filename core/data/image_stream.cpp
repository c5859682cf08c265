#include "data/image_stream.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nn/cpu_team.h"

namespace mumoe::data {

torch::Tensor decode_images(const ImageStream& stream, const torch::Tensor& indices, const ImageTransform& transform) {
  const auto index = indices.to(torch::kLong).contiguous();
  const auto* samples = index.data_ptr<int64_t>();
  const int64_t n = index.numel();
  if (n == 0) return torch::empty({0});
  // The first sample gives the results' shape: each is copied into its row of the batch as soon
  // as it is made, so that a thread holds one image at a time (results kept until a final stack
  // held the batch twice, and the other threads' in their own allocator arenas: 1.4 GB peak
  // instead of 1.07 for batches of 500 ViT inputs, 2026-11-26).
  // One thread per physical core (nn/cpu_team.h), or ATen's team where the program or user chose
  // its size; the first sample below on one thread too where the others will run beside it.
  const int per_core = nn::per_core_openmp_team();
  const int64_t threads = std::min<int64_t>(n - 1, per_core > 0 ? per_core : at::get_num_threads());
  const auto first = [&] {
    const nn::AtenTeam one_team(threads > 1 ? 1 : 0);
    return transform(stream.image(samples[0]), samples[0]);
  }();
  auto shape = first.sizes().vec();
  shape.insert(shape.begin(), n);
  auto batch = torch::empty(shape, first.options());
  batch[0].copy_(first);
  const auto decode = [&](int64_t k) {
    const auto result = transform(stream.image(samples[k]), samples[k]);
    if (result.sizes() != first.sizes())
      throw std::invalid_argument("decode_images: sample " + std::to_string(samples[k]) + " became " +
                                  c10::str(result.sizes()) + ", the first " + c10::str(first.sizes()));
    batch[k].copy_(result);
  };
  // Threads of our own, each with a contiguous share of the images and a team of one for the
  // tensor ops inside the transform: decoding a JPEG and resizing it is milliseconds, far above
  // the cost of a thread, and images differ in size. (at::parallel_for, used here before, is a
  // header template that runs in parallel only in files compiled with OpenMP, which ours are
  // not: it decoded every batch on the calling thread alone.)
  if (threads <= 1) {
    for (int64_t k = 1; k < n; ++k) decode(k);
    return batch;
  }
  std::vector<std::exception_ptr> failures(static_cast<size_t>(threads));
  const auto decode_share = [&](int64_t t) {
    const int64_t begin = 1 + (n - 1) * t / threads, end = 1 + (n - 1) * (t + 1) / threads;
    try {
      for (int64_t k = begin; k < end; ++k) decode(k);
    } catch (...) {
      failures[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t)
    workers.emplace_back([&, t] {
      const nn::AtenTeam one_team(1);
      decode_share(t);
    });
  {
    const nn::AtenTeam one_team(1);
    decode_share(0);
  }
  for (auto& w : workers) w.join();
  // The first failing share's error, as one thread going through the samples in order would
  // have reported it.
  for (const auto& failure : failures)
    if (failure) std::rethrow_exception(failure);
  return batch;
}

}  // namespace mumoe::data
