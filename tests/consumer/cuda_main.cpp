// Uses the installed gossamer::optimizers_cuda: opens the CUDA device, or prints why there is
// none (the one line make_cuda_device() throws); either way the package linked.
#include <cstdio>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/cuda/cuda_device.hpp"

int main() {
    try {
        const auto device = gossamer::optim::cuda::make_cuda_device();
        std::printf("cuda device: %s\n", device->description().c_str());
    } catch (const gossamer::Error& e) {
        std::printf("%s\n", e.what());
    }
    return 0;
}
