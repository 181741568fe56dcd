// One harness for the five payload codecs (optimizers/compressor.hpp): decode_add of any bytes
// either throws gossamer::Error or adds Q(x) to y without touching memory past y; and encode
// then decode of any vector keeps the codec's promise (its kept count, its error bound).
//
// Input: the vector length n (u16, at most 4096), the codec's parameter (u16: int8 block
// 1 + p % 1024, int4 block 1 + p % 195, or the top-k/random-k fraction in 1/65536ths), the key
// (seed, stream, index: u64 each), then the bytes to decode; the same bytes, read as floats, are
// the vector to encode.
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

#include "fuzz_support.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/compress/compressor.hpp"

namespace gossamer::fuzz {

inline int run_codec(optim::CompressorKind kind, const std::uint8_t* data, std::size_t size) {
    using namespace gossamer::optim;
    Input in(data, size);
    const std::size_t n = in.u16() % 4097;
    const std::uint16_t param = in.u16();
    CompressorConfig config;
    config.kind = kind;
    config.block = 1 + param % (kind == CompressorKind::int4 ? kInt4MaxBlock : 1024);
    config.fraction = (1.0 + param) / 65536.0;
    config.seed = in.u64();
    CodecKey key{in.u64(), in.u64(), in.u64()};
    const auto bytes = in.rest_bytes();
    auto q = make_compressor(config);
    check(q->kept(n) <= n && (n == 0 || q->kept(n) >= 1), "a codec keeps 1 to n values");
    check(q->encoded_words(n) * 4 >= q->encoded_bytes(n), "encoded words hold encoded bytes");

    std::vector<float> y(n, 0.0f);
    try {
        q->decode_add(bytes, key, y);
        check(bytes.size() >= q->encoded_bytes(n), "a decode reads only a whole message");
    } catch (const Error&) {
    }

    // Encode then decode the input's floats: a sender's own decode is what the receiver gets.
    std::vector<float> x(std::min(n, bytes.size() / 4));
    if (!x.empty()) std::memcpy(x.data(), bytes.data(), x.size() * 4);
    std::vector<std::byte> wire(q->encoded_words(x.size()) * 4);
    q->encode(x, key, wire);
    std::vector<float> back(x.size());
    q->decode(wire, key, back);
    std::size_t nonzero = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
        if (back[k] != 0.0f) ++nonzero;
        if (!std::isfinite(x[k]) || std::abs(x[k]) > 6e4f) continue;
        if (kind == CompressorKind::fp16)
            check(std::abs(back[k] - x[k]) <= std::abs(x[k]) * 1e-3f + 1e-7f,
                  "fp16 rounds to within half an ulp");
        if ((kind == CompressorKind::topk || kind == CompressorKind::randomk) && back[k] != 0.0f)
            check(back[k] == x[k], "a sparse codec keeps values exactly");
    }
    check(nonzero <= q->kept(x.size()), "a codec keeps at most kept(n) values");
    if (kind == CompressorKind::int4)  // within one step (max|x| / 7) of its block, when finite
        for (std::size_t lo = 0; lo < x.size(); lo += config.block) {
            const std::size_t hi = std::min(x.size(), lo + config.block);
            float max_abs = 0;
            bool finite = true;
            for (std::size_t k = lo; k < hi; ++k) {
                finite = finite && std::isfinite(x[k]);
                max_abs = std::max(max_abs, std::abs(x[k]));
            }
            if (!finite || max_abs > 1e30f) continue;
            for (std::size_t k = lo; k < hi; ++k)
                check(std::abs(back[k] - x[k]) <= max_abs / 7 * (1 + 1e-5f) + 1e-38f,
                      "int4 errs by less than one step of its block");
        }
    return 0;
}

}  // namespace gossamer::fuzz
