#include "nn/device.h"

#include <torch/cuda.h>

#include "io/errors.h"

namespace mumoe::nn {

torch::Device parse_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available()) throw UsageError("--device " + name + ": CUDA is not available");
    torch::Device device(torch::kCPU);
    try {
      device = torch::Device(name);
    } catch (const c10::Error&) {
      throw UsageError("--device '" + name + "' is not a valid device (expected cuda or cuda:N)");
    }
    // A GPU the machine lacks would otherwise fail deep inside CUDA, at the first tensor moved.
    const auto count = static_cast<int64_t>(torch::cuda::device_count());
    if (device.has_index() && device.index() >= count)
      throw UsageError("--device " + name + ": this machine has " + std::to_string(count) + " CUDA device" +
                       (count == 1 ? "" : "s") + " (cuda:0" + (count > 1 ? " … cuda:" + std::to_string(count - 1) : "") +
                       ")");
    return device;
  }
  throw UsageError("--device must be cpu or cuda[:N], got '" + name + "'");
}

}  // namespace mumoe::nn
