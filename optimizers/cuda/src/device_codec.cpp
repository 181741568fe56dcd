#include "gossamer/optimizers/cuda/device_codec.hpp"

#include <fmt/format.h>

#include <vector>

#include "gossamer/core/error.hpp"

namespace gossamer::optim::cuda {

namespace dev = gossamer::cuda;

DeviceCodec::DeviceCodec(const CompressorConfig& config, std::size_t capacity)
    : config_(config),
      cpu_(make_compressor(config)),
      capacity_(capacity),
      topk_(config.kind == CompressorKind::topk ? capacity : 0) {
    // int4 has no kernels yet: jobs refuse it on a device before they start
    // (check_device_codec() in the protocols); this is the last guard.
    check_device_codec(config, "compressor");
    if (config.kind == CompressorKind::randomk && capacity > UINT32_MAX)
        throw Error("device randomk: vectors of 2^32 values or more are not supported");
    if (config.kind == CompressorKind::randomk)
        indices_ = dev::DeviceBuffer(4 * cpu_->kept(capacity));
}

// The indices the CPU's random-k draws for this key, as uint32 on the device. The previous
// message's kernel may still read the buffer on `stream`: wait for it first. The upload itself
// is synchronous (pageable memory), so the host vector may go once it returns.
const std::uint32_t* DeviceCodec::upload_indices(std::size_t n, const CodecKey& key, void* stream) {
    dev::synchronize(stream);
    const auto drawn = randomk_indices(config_, n, key);
    const std::vector<std::uint32_t> idx(drawn.begin(), drawn.end());
    dev::copy_to_device(indices_.data(), idx.data(), 4 * idx.size());
    return indices_.as<std::uint32_t>();
}

void DeviceCodec::check_capacity(std::size_t n) const {
    if (n > capacity_)
        throw Error(fmt::format("device {}: {} values, capacity {}", to_string(config_.kind), n,
                                capacity_));
}

void DeviceCodec::encode(const float* x, std::size_t n, const CodecKey& key, std::byte* out,
                         void* stream) {
    check_capacity(n);
    switch (config_.kind) {
        case CompressorKind::fp16:
            return dev::fp16_encode(x, n, out, stream);
        case CompressorKind::int8:
            return dev::int8_encode(x, n, config_.block, codec_seed(config_, key), out, stream);
        case CompressorKind::topk:
            return dev::topk_encode(x, n, kept(n), out, topk_, stream);
        case CompressorKind::int4:
            break;  // refused by the constructor
        case CompressorKind::randomk:
            if (n == 0) return;
            return dev::gather(x, upload_indices(n, key, stream), kept(n),
                               reinterpret_cast<float*>(out), stream);
    }
}

void DeviceCodec::decode_add(const std::byte* in, const CodecKey& key, float* y, std::size_t n,
                             void* stream) {
    check_capacity(n);
    switch (config_.kind) {
        case CompressorKind::fp16:
            return dev::fp16_decode_add(in, n, y, stream);
        case CompressorKind::int8:
            return dev::int8_decode_add(in, n, config_.block, y, stream);
        case CompressorKind::topk:
            return dev::topk_decode_add(in, kept(n), n, y, topk_, stream);
        case CompressorKind::int4:
            break;  // refused by the constructor
        case CompressorKind::randomk:
            if (n == 0) return;
            return dev::scatter_add(reinterpret_cast<const float*>(in),
                                    upload_indices(n, key, stream), kept(n), y, stream);
    }
}

}  // namespace gossamer::optim::cuda
