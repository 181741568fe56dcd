// PeerOptions::device -> the Device that holds a gossamer::Peer's parameters
// (docs/operations/gpu.md).
#include <fmt/format.h>

#include "api_worker.hpp"
#include "gossamer/core/error.hpp"
#ifdef GOSSAMER_HAVE_CUDA
#include "gossamer/optimizers/cuda/cuda_device.hpp"
#endif

namespace gossamer::api {

std::shared_ptr<proto::Device> make_peer_device(const std::string& name) {
    if (name == "cpu") return nullptr;
    if (name == "emulated") return proto::emulated_device();
    if (name == "cuda") {
#ifdef GOSSAMER_HAVE_CUDA
        try {
            return optim::cuda::make_cuda_device();
        } catch (const Error& e) {
            std::string what = e.what();  // "no CUDA device: <why>; use device "cpu""
            const std::string advice = "; use device \"cpu\"";
            if (what.ends_with(advice)) what.resize(what.size() - advice.size());
            throw ConfigError("", "PeerOptions::device", what,
                              "run on a machine with an NVIDIA GPU and its driver, or use device "
                              "\"cpu\"");
        }
#else
        throw ConfigError("", "PeerOptions::device", "this build of Gossamer has no CUDA support",
                          "rebuild with the CUDA toolkit installed (-DGOSSAMER_USE_CUDA=ON), or "
                          "use device \"cpu\"");
#endif
    }
    throw ConfigError("", "PeerOptions::device", fmt::format("unknown device \"{}\"", name),
                      "use \"cpu\", \"cuda\" or \"emulated\"");
}

}  // namespace gossamer::api
