// The CUDA Device's encode and decode_add against the CPU compressors on the same floats: the
// same bytes (int8: same scales, codes within one step) and bit-identical decoding, for
// partitions at odd offsets, growing sizes, configurations that differ only in their seed, and
// two threads at once.
#include <doctest/doctest.h>

#include <exception>
#include <thread>
#include <vector>

#include "cuda/cuda_device_util.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"

using gossamer::test::check_int8_wire;
using gossamer::test::cuda_device_or_null;
using gossamer::test::get;
using gossamer::test::put;
using gossamer::test::same_bits;
using gossamer::test::test_values;
namespace optim = gossamer::optim;
namespace proto = gossamer::proto;

namespace {

optim::CompressorConfig config(optim::CompressorKind kind, std::uint64_t seed = 5) {
    optim::CompressorConfig c;
    c.kind = kind;
    c.fraction = 0.03;
    c.block = 100;
    c.seed = seed;
    return c;
}

// One message both ways at offset `off` of an n + off device vector: the device's bytes against
// the CPU's, the CPU's bytes decoded on the device against the CPU's decoding.
void check_codec(proto::Device& d, const optim::Compressor& q, std::size_t n, std::size_t off,
                 const optim::CodecKey& key) {
    CAPTURE(optim::to_string(q.kind()));
    CAPTURE(n);
    const auto x = test_values(n + off, static_cast<unsigned>(n + 1));
    auto dx = put(d, x);
    const std::span<const float> part = std::span<const float>(x).subspan(off);
    const std::size_t bytes = q.encoded_bytes(n);
    std::vector<std::byte> ref(bytes);
    q.encode(part, key, ref);
    std::vector<std::byte> got(bytes + 5, std::byte{0xab});  // a longer buffer: tail zeroed
    d.encode(q, dx.data() + off, n, key, got);
    for (std::size_t k = bytes; k < got.size(); ++k) CHECK(got[k] == std::byte{0});
    got.resize(bytes);
    if (q.kind() == optim::CompressorKind::int8)
        check_int8_wire(got, ref, n, q.config().block);
    else
        CHECK(got == ref);

    for (const auto* message : {&ref, &got}) {  // the CPU's bytes, then the device's own
        auto y = test_values(n + off, static_cast<unsigned>(n + 2));
        auto dy = put(d, y);
        q.decode_add(*message, key, std::span<float>(y).subspan(off));
        d.decode_add(q, *message, key, dy.data() + off, n);
        CHECK(same_bits(get(d, dy.data(), n + off), y));
    }
}

}  // namespace

TEST_CASE("make_compressor keeps the configuration it was built from") {
    const auto c = config(optim::CompressorKind::randomk, 77);
    const auto q = optim::make_compressor(c);
    CHECK(q->config().kind == c.kind);
    CHECK(q->config().fraction == c.fraction);
    CHECK(q->config().block == c.block);
    CHECK(q->config().seed == 77);
}

TEST_CASE("cuda device encode and decode_add match the CPU for every compressor") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    for (auto kind : {optim::CompressorKind::fp16, optim::CompressorKind::int8,
                      optim::CompressorKind::topk, optim::CompressorKind::randomk}) {
        const auto q = optim::make_compressor(config(kind));
        // Growing sizes: the cached codec is rebuilt for the larger vector.
        for (std::size_t n : {1u, 1000u, 30011u}) check_codec(*d, *q, n, 3, {11, 12, n});
        // n = 0: nothing is encoded, and the whole buffer is zeroed as on the CPU.
        std::vector<std::byte> out(4, std::byte{1});
        d->encode(*q, nullptr, 0, {}, out);
        CHECK(out == std::vector<std::byte>(4, std::byte{0}));
        d->decode_add(*q, {}, {}, nullptr, 0);
    }
}

TEST_CASE("cuda device keeps one codec per configuration, seeds included") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    for (auto kind : {optim::CompressorKind::randomk, optim::CompressorKind::int8}) {
        // Alternating two configurations that differ only in the seed: a cache keyed by kind
        // alone would draw the first one's random-k indices for the second.
        const auto q5 = optim::make_compressor(config(kind, 5));
        const auto q6 = optim::make_compressor(config(kind, 6));
        for (int i = 0; i < 2; ++i) {
            check_codec(*d, *q5, 5000, 1, {1, 2, 3});
            check_codec(*d, *q6, 5000, 1, {1, 2, 3});
        }
    }
}

TEST_CASE("cuda device encodes a vector past the staging threshold") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    // fp16 of 5 Mi floats: 10 MiB of bytes go down through the pinned chunks, and back up.
    const auto q = optim::make_compressor(config(optim::CompressorKind::fp16));
    check_codec(*d, *q, std::size_t{5} << 20, 1, {4, 5, 6});
}

TEST_CASE("cuda device refuses short buffers in one line") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    const auto q = optim::make_compressor(config(optim::CompressorKind::fp16));
    proto::DeviceVector v(*d, 10);
    std::vector<std::byte> small(19);
    CHECK_THROWS_WITH_AS(d->encode(*q, v.data(), 10, {}, small),
                         "cuda device: fp16 encoding needs 20 bytes, the buffer holds 19",
                         gossamer::Error);
    CHECK_THROWS_WITH_AS(d->decode_add(*q, small, {}, v.data(), 10),
                         "cuda device: a fp16 message of 19 bytes, expected 20", gossamer::Error);
}

TEST_CASE("cuda device calls from two threads at once give the single-thread results") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    // Both threads encode and decode through the shared scratch and codec cache, and one also
    // adds uploads; every result is checked against the CPU.
    auto work = [&](optim::CompressorKind kind, std::uint64_t seed) {
        const auto q = optim::make_compressor(config(kind, seed));
        for (std::size_t i = 0; i < 20; ++i) {
            check_codec(*d, *q, 20000 + i, i % 4, {seed, i, i});
            auto y = test_values(3000, static_cast<unsigned>(i));
            const auto src = test_values(3000, static_cast<unsigned>(i + 100));
            auto dy = put(*d, y);
            d->upload_add(dy.data(), src);
            for (std::size_t k = 0; k < y.size(); ++k) y[k] += src[k];
            CHECK(same_bits(get(*d, dy.data(), y.size()), y));
        }
    };
    // doctest's assertions are thread-safe; a REQUIRE or a device error in the other thread is
    // carried back and rethrown here instead of terminating the process.
    std::exception_ptr failed;
    std::thread other([&] {
        try {
            work(optim::CompressorKind::randomk, 1);
        } catch (...) {
            failed = std::current_exception();
        }
    });
    work(optim::CompressorKind::topk, 2);
    other.join();
    if (failed) std::rethrow_exception(failed);
}
