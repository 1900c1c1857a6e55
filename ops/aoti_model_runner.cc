// The AOTInductor model runner for "xxnpu": what torch._inductor.aoti_load_package (and
// torch::inductor::AOTIModelPackageLoader in C++) look up for a package compiled on xxnpu.
//
// Why a runner of our own, and why it hands the model "cpu": the model .so's constructor
// parses its device string with torch 2.13's parse_device_str
// (torch/csrc/inductor/aoti_runtime/model_base.h), which accepts only cpu|cuda|xpu|mps, so
// "xxnpu" fails before anything runs. Given "cpu", the model's own device is the host, which
// is right for what AOTI's runtime does with it on a non-CUDA device: it keeps the constant
// blob in host memory. That is why an xxnpu package is compiled without constants in the .so
// (python/torch_xxnpu/compiler/inductor.py refuses otherwise) and its weights are loaded as
// xxnpu tensors (load_constants / update_constant_buffer). Everything the generated code
// allocates is on PrivateUse1 (the wrapper says so per buffer); the device index is the
// current device, set here around each run from the runner's "xxnpu:N".
#include <c10/core/Device.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace xxnpu {
namespace {

class AOTIModelContainerRunnerXxnpu : public torch::inductor::AOTIModelContainerRunner {
 public:
  AOTIModelContainerRunnerXxnpu(const std::string& model_so_path, size_t num_models, c10::Device device,
                                const std::string& bin_dir, bool run_single_threaded)
      : AOTIModelContainerRunner(model_so_path, num_models, "cpu", bin_dir, run_single_threaded), device_(device) {}

 protected:
  std::vector<at::Tensor> run_impl(std::vector<AtenTensorHandle>& input_handles, void* stream_handle) override {
    c10::DeviceGuard guard(device_);
    return AOTIModelContainerRunner::run_impl(input_handles, stream_handle);
  }

 private:
  c10::Device device_;
};

std::unique_ptr<torch::inductor::AOTIModelContainerRunner> CreateRunner(const std::string& model_so_path,
                                                                       size_t num_models,
                                                                       const std::string& device_str,
                                                                       const std::string& bin_dir,
                                                                       const bool run_single_threaded) {
  c10::Device device(device_str);  // "xxnpu" or "xxnpu:N"; throws on anything else
  if (device.type() != c10::DeviceType::PrivateUse1) {
    throw std::invalid_argument("the xxnpu AOTInductor runner got device '" + device_str + "'");
  }
  if (!device.has_index()) device = c10::Device(device.type(), 0);
  return std::make_unique<AOTIModelContainerRunnerXxnpu>(model_so_path, num_models, device, bin_dir,
                                                         run_single_threaded);
}

const torch::inductor::RegisterAOTIModelRunner kRegister("xxnpu", &CreateRunner);

}  // namespace
}  // namespace xxnpu
