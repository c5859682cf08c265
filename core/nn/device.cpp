#include "nn/device.h"

#include <torch/cuda.h>

#include "io/errors.h"

namespace mumoe::nn {

torch::Device parse_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available()) throw UsageError("--device " + name + ": CUDA is not available");
    try {
      return torch::Device(name);
    } catch (const c10::Error&) {
      throw UsageError("--device '" + name + "' is not a valid device (expected cuda or cuda:N)");
    }
  }
  throw UsageError("--device must be cpu or cuda[:N], got '" + name + "'");
}

}  // namespace mumoe::nn
