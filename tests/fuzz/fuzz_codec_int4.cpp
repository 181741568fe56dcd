// The int4 payload codec: see codec_harness.hpp.
#include "codec_harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return gossamer::fuzz::run_codec(gossamer::optim::CompressorKind::int4, data, size);
}
