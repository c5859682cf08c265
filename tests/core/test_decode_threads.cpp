// data::decode_images (core/data/image_stream.h): a batch is decoded on one thread per physical
// core (nn/cpu_team.h), each with a contiguous share and a team of one for its tensor ops; the
// results come back in the order asked, and a failure is reported. Before, the decoding loop was
// an at::parallel_for in a file compiled without OpenMP, so it ran on the calling thread alone —
// which this test would have caught.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "data/image_stream.h"
#include "io/cpu_cores.h"

namespace decode_threads_test {

namespace {

// Images made up on demand, of three sizes; `failing` cannot be decoded.
class MadeUpImages : public mumoe::data::ImageStream {
 public:
  int64_t size() const override { return 64; }
  int64_t channels() const override { return 1; }
  torch::Tensor image(int64_t i) const override {
    if (i == failing) throw std::runtime_error("sample " + std::to_string(i) + " cannot be decoded");
    return torch::full({1, 4 + i % 3, 5}, static_cast<uint8_t>(i), torch::kUInt8);  // sizes differ
  }
  std::string source(int64_t i) const override { return "made-up " + std::to_string(i); }
  const std::string& fingerprint() const override { return name; }
  int64_t failing = -1;
  std::string name = "made-up";
};

}  // namespace

TEST(DecodeImages, ABatchIsSharedOverAThreadPerCoreInOrderAndTheFirstFailureReported) {
  if (std::getenv("OMP_NUM_THREADS") || std::getenv("MKL_NUM_THREADS"))
    GTEST_SKIP() << "OMP_NUM_THREADS or MKL_NUM_THREADS is set: the user's team is kept";
  const int saved = at::get_num_threads();
  const int ours = at::intraop_default_num_threads();
  at::set_num_threads(ours);
  const int threads = std::max(ours, mumoe::io::physical_cores());
  MadeUpImages images;
  std::mutex m;
  std::set<std::thread::id> decoders;
  std::vector<int> teams;
  const auto transform = [&](const torch::Tensor& image, int64_t sample) {
    {
      const std::lock_guard<std::mutex> lock(m);
      decoders.insert(std::this_thread::get_id());
      teams.push_back(at::get_num_threads());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // long enough for the threads to overlap
    // The same shape for every sample, and the sample's own value.
    return image.to(torch::kFloat32).mean().reshape({1}) + 1000.0 * static_cast<double>(sample);
  };
  const auto order = torch::tensor({5, 3, 9, 0, 63, 17, 2, 8}, torch::kLong);
  const auto out = mumoe::data::decode_images(images, order, transform);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{8, 1}));
  for (int64_t k = 0; k < 8; ++k) {
    const auto sample = order[k].item<int64_t>();
    EXPECT_DOUBLE_EQ(out[k][0].item<double>(), static_cast<double>(sample) + 1000.0 * static_cast<double>(sample));
  }
  EXPECT_EQ(static_cast<int>(decoders.size()), std::min(threads, 8));
  for (const int team : teams) EXPECT_EQ(team, threads > 1 ? 1 : ours);  // a team of one beside the others
  // A failure in the second half is reported (the share that holds it stops there).
  images.failing = 63;
  try {
    mumoe::data::decode_images(images, order, transform);
    ADD_FAILURE() << "a failing decode was not reported";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("sample 63"), std::string::npos) << e.what();
  }
  // Results of another shape are refused, naming the sample.
  images.failing = -1;
  try {
    mumoe::data::decode_images(images, order, [](const torch::Tensor& image, int64_t sample) {
      return sample == 17 ? torch::zeros({2}) : image.to(torch::kFloat32).mean().reshape({1});
    });
    ADD_FAILURE() << "a result of another shape was not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sample 17"), std::string::npos) << e.what();
  }
  at::set_num_threads(saved);
}

}  // namespace decode_threads_test
