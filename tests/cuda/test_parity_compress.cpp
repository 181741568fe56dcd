// Device compressors against the CPU ones (gossamer/optimizers/compressor.hpp) on the same
// inputs: the same wire bytes (int8: the same scales, codes within one step), and device
// decoding of CPU bytes equal to CPU decoding (docs/operations/gpu.md, "Tolerances").
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cuda/device.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/cuda/compress.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"

namespace {

using gossamer::test::cuda_device_or_skip;
using gossamer::test::download;
using gossamer::test::same_bits;
using gossamer::test::test_values;
using gossamer::test::upload;
namespace cuda = gossamer::cuda;
namespace optim = gossamer::optim;

std::unique_ptr<optim::Compressor> cpu(optim::CompressorKind kind, double fraction = 0.01,
                                       std::size_t block = 256) {
    optim::CompressorConfig c;
    c.kind = kind;
    c.fraction = fraction;
    c.block = block;
    return optim::make_compressor(c);
}

std::vector<std::byte> download_bytes(const cuda::DeviceBuffer& b, std::size_t bytes) {
    std::vector<std::byte> v(bytes);
    cuda::synchronize();
    cuda::copy_to_host(v.data(), b.data(), bytes);
    return v;
}

cuda::DeviceBuffer upload_bytes(const std::vector<std::byte>& v) {
    cuda::DeviceBuffer b(v.size());
    cuda::copy_to_device(b.data(), v.data(), v.size());
    return b;
}

// Edge values for fp16: half range limits, subnormals, ties, saturation, NaN and infinities.
std::vector<float> fp16_values() {
    auto v = test_values(5001, 7);
    const float inf = std::numeric_limits<float>::infinity();
    for (float e :
         {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, 1e-8f, 5.96e-8f, 2.98e-8f, 6.1e-5f,
          1.0f + 0x1.0p-11f, 1.0f + 0x1.8p-11f, inf, -inf, std::numeric_limits<float>::quiet_NaN()})
        v.push_back(e);
    return v;
}

}  // namespace

TEST_CASE("cuda fp16 encodes the CPU's bytes and decodes them alike") {
    if (!cuda_device_or_skip()) return;
    const auto x = fp16_values();
    const std::size_t n = x.size();
    const auto q = cpu(optim::CompressorKind::fp16);
    std::vector<std::byte> ref(q->encoded_bytes(n));
    q->encode(x, {}, ref);
    auto dx = upload(x);
    cuda::DeviceBuffer wire(ref.size());
    cuda::fp16_encode(dx.as<float>(), n, wire.as<std::byte>());
    CHECK(download_bytes(wire, ref.size()) == ref);

    auto y = test_values(n, 9);
    auto dy = upload(y);
    q->decode_add(ref, {}, y);
    cuda::fp16_decode_add(wire.as<std::byte>(), n, dy.as<float>());
    CHECK(same_bits(download(dy, n), y));
}

TEST_CASE("cuda int8 has the CPU's scales, codes within one step, and decodes alike") {
    if (!cuda_device_or_skip()) return;
    for (std::size_t block : {1, 3, 256, 1000}) {
        CAPTURE(block);
        const auto x = test_values(10002, 11);  // not a multiple of 4: the last block has a tail
        const std::size_t n = x.size(), nb = (n + block - 1) / block;
        const auto q = cpu(optim::CompressorKind::int8, 0.01, block);
        std::vector<std::byte> ref(q->encoded_bytes(n));
        q->encode(x, {1, 2, 3}, ref);
        auto dx = upload(x);
        cuda::DeviceBuffer wire(ref.size());
        cuda::int8_encode(dx.as<float>(), n, block, 42, wire.as<std::byte>());
        const auto got = download_bytes(wire, ref.size());
        CHECK(std::memcmp(got.data(), ref.data(), 4 * nb) == 0);  // scales
        std::size_t far = 0, differ = 0;
        for (std::size_t k = 0; k < n; ++k) {
            const auto a = static_cast<std::int8_t>(got[4 * nb + k]);
            const auto b = static_cast<std::int8_t>(ref[4 * nb + k]);
            far += std::abs(a - b) > 1;
            differ += a != b;
        }
        CHECK(far == 0);
        // Both round stochastically, with different draws: they differ somewhere, not everywhere.
        if (block > 1) CHECK(differ < n);

        auto y = test_values(n, 12);
        auto dy = upload(y);
        auto dref = upload_bytes(ref);
        q->decode_add(ref, {}, y);
        cuda::int8_decode_add(dref.as<std::byte>(), n, block, dy.as<float>());
        CHECK(same_bits(download(dy, n), y));
    }
}

TEST_CASE("cuda int8 stochastic rounding is unbiased") {
    if (!cuda_device_or_skip()) return;
    // 0.3 of a step everywhere: the mean decoded value must come back to 0.3 * scale.
    const std::size_t n = 1 << 16, block = 256;
    std::vector<float> x(n, 0.3f);
    for (std::size_t b = 0; b < n; b += block) x[b] = 127.0f;  // scale 1 per block
    auto dx = upload(x);
    cuda::DeviceBuffer wire(4 * (n / block) + n);
    cuda::DeviceBuffer out(n * sizeof(float));
    cuda::fill_zero(out.data(), n * sizeof(float));
    cuda::int8_encode(dx.as<float>(), n, block, 5, wire.as<std::byte>());
    cuda::int8_decode_add(wire.as<std::byte>(), n, block, out.as<float>());
    const auto y = download(out, n);
    double sum = 0;
    std::size_t count = 0;
    for (std::size_t k = 0; k < n; ++k)
        if (k % block) sum += y[k], ++count;
    CHECK(sum / static_cast<double>(count) == doctest::Approx(0.3).epsilon(0.02));
}

TEST_CASE("cuda topk selects the CPU's set, ties and NaN included, in the CPU's bytes") {
    if (!cuda_device_or_skip()) return;
    auto x = test_values(70001, 21);  // more than 16 tiles
    for (std::size_t i = 0; i < x.size(); i += 97) x[i] = (i % 2 ? -1.0f : 1.0f) * 4096.0f;  // ties
    x[500] = std::numeric_limits<float>::quiet_NaN();
    x[501] = -std::numeric_limits<float>::infinity();
    const std::size_t n = x.size();
    cuda::TopKWorkspace ws(n);
    auto dx = upload(x);
    for (double fraction : {1e-4, 0.005, 0.01, 0.3, 1.0}) {
        CAPTURE(fraction);
        const auto q = cpu(optim::CompressorKind::topk, fraction);
        const std::size_t k = q->kept(n);
        std::vector<std::byte> ref(q->encoded_bytes(n));
        q->encode(x, {}, ref);
        cuda::DeviceBuffer wire(ref.size());
        cuda::topk_encode(dx.as<float>(), n, k, wire.as<std::byte>(), ws);
        const auto got = download_bytes(wire, ref.size());
        CHECK(std::memcmp(got.data(), ref.data(), 4 * k) == 0);  // the same indices, ascending
        CHECK(got == ref);                                       // and the same values

        auto y = test_values(n, 22);
        auto dy = upload(y);
        q->decode_add(ref, {}, y);
        cuda::topk_decode_add(wire.as<std::byte>(), k, n, dy.as<float>(), ws);
        CHECK(same_bits(download(dy, n), y));
    }
}

TEST_CASE("cuda topk_decode_add refuses an index past the vector") {
    if (!cuda_device_or_skip()) return;
    const std::uint32_t msg[4] = {1, 9, 0, 0};  // indices 1 and 9 of a 4-value vector
    cuda::DeviceBuffer wire(sizeof msg), y(4 * sizeof(float));
    cuda::copy_to_device(wire.data(), msg, sizeof msg);
    cuda::fill_zero(y.data(), y.size());
    cuda::TopKWorkspace ws(4);
    CHECK_THROWS_WITH_AS(cuda::topk_decode_add(wire.as<std::byte>(), 2, 4, y.as<float>(), ws),
                         doctest::Contains("index 9 of a 4-value vector"), gossamer::Error);
}

TEST_CASE("cuda gather and scatter_add match random-k at the CPU's indices") {
    if (!cuda_device_or_skip()) return;
    const std::size_t n = 20011;
    optim::CompressorConfig c;
    c.kind = optim::CompressorKind::randomk;
    c.fraction = 0.02;
    c.seed = 3;
    const auto q = optim::make_compressor(c);
    const std::size_t k = q->kept(n);
    const optim::CodecKey key{4, 5, 6};
    // The CPU draws its indices inside the codec: encoding 0, 1, 2, ... reveals them.
    std::vector<float> iota(n);
    for (std::size_t i = 0; i < n; ++i) iota[i] = static_cast<float>(i);
    std::vector<std::byte> drawn(q->encoded_bytes(n));
    q->encode(iota, key, drawn);
    std::vector<std::uint32_t> idx(k);
    for (std::size_t i = 0; i < k; ++i) {
        float v;
        std::memcpy(&v, drawn.data() + 4 * i, 4);
        idx[i] = static_cast<std::uint32_t>(v);
    }
    const auto x = test_values(n, 31);
    std::vector<std::byte> ref(q->encoded_bytes(n));
    q->encode(x, key, ref);
    auto dx = upload(x);
    cuda::DeviceBuffer didx(4 * k), wire(4 * k);
    cuda::copy_to_device(didx.data(), idx.data(), 4 * k);
    cuda::gather(dx.as<float>(), didx.as<std::uint32_t>(), k, wire.as<float>());
    CHECK(download_bytes(wire, ref.size()) == ref);

    auto y = test_values(n, 32);
    auto dy = upload(y);
    q->decode_add(ref, key, y);
    cuda::scatter_add(wire.as<float>(), didx.as<std::uint32_t>(), k, dy.as<float>());
    CHECK(same_bits(download(dy, n), y));
}
