// DeviceCodec: the CPU Compressor's messages from device vectors, for every compressor.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/device.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/cuda/device_codec.hpp"

using gossamer::test::cuda_device_or_skip;
using gossamer::test::download;
using gossamer::test::test_values;
using gossamer::test::upload;
namespace optim = gossamer::optim;

TEST_CASE("DeviceCodec encodes the CPU's messages and decodes them alike, for every compressor") {
    if (!cuda_device_or_skip()) return;
    const std::size_t n = 30011;
    const auto x = test_values(n, 41);
    auto dx = upload(x);
    for (auto kind : {optim::CompressorKind::fp16, optim::CompressorKind::int8,
                      optim::CompressorKind::topk, optim::CompressorKind::randomk}) {
        CAPTURE(optim::to_string(kind));
        optim::CompressorConfig c;
        c.kind = kind;
        c.fraction = 0.02;
        c.block = 128;
        c.seed = 5;
        const auto cpu = optim::make_compressor(c);
        optim::cuda::DeviceCodec codec(c, n);
        const optim::CodecKey key{7, 8, 9};
        const std::size_t bytes = codec.encoded_bytes(n);
        REQUIRE(bytes == cpu->encoded_bytes(n));
        std::vector<std::byte> ref(bytes);
        cpu->encode(x, key, ref);
        gossamer::cuda::DeviceBuffer wire(bytes);
        codec.encode(dx.as<float>(), n, key, wire.as<std::byte>());
        std::vector<std::byte> got(bytes);
        gossamer::cuda::synchronize();
        gossamer::cuda::copy_to_host(got.data(), wire.data(), bytes);
        if (kind == optim::CompressorKind::int8)
            gossamer::test::check_int8_wire(got, ref, n, c.block);
        else
            CHECK(got == ref);
        // The CPU's bytes decoded on the device equal the CPU's decoding.
        auto y = test_values(n, 42);
        auto dy = upload(y);
        gossamer::cuda::copy_to_device(wire.data(), ref.data(), bytes);
        cpu->decode_add(ref, key, y);
        codec.decode_add(wire.as<std::byte>(), key, dy.as<float>(), n);
        const auto gy = download(dy, n);
        CHECK(std::memcmp(gy.data(), y.data(), n * sizeof(float)) == 0);
    }
}

TEST_CASE("DeviceCodec refuses a vector past its capacity and an invalid config") {
    optim::CompressorConfig c;
    c.kind = optim::CompressorKind::fp16;
    optim::cuda::DeviceCodec codec(c, 10);  // fp16 allocates nothing: no device needed
    float fake[1] = {};
    std::byte out[2] = {};
    CHECK_THROWS_WITH_AS(codec.encode(fake, 11, {}, out), doctest::Contains("capacity 10"),
                         gossamer::Error);
    c.kind = optim::CompressorKind::topk;
    c.fraction = 0;
    CHECK_THROWS_AS(optim::cuda::DeviceCodec(c, 10), gossamer::Error);
}
