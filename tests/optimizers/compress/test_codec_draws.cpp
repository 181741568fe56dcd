// The codecs' random draws as other implementations (the device codec) reproduce them.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "gossamer/optimizers/compress/compressor.hpp"

using namespace gossamer::optim;

TEST_CASE("randomk_indices are the indices random-k encodes and decodes at") {
    CompressorConfig c;
    c.kind = CompressorKind::randomk;
    c.fraction = 0.03;
    c.seed = 9;
    const auto q = make_compressor(c);
    for (std::size_t n : {1, 7, 1000, 40009}) {
        CAPTURE(n);
        const CodecKey key{1, 2, n};
        // Encoding 0, 1, 2, ... sends the drawn indices themselves (exact below 2^24).
        std::vector<float> iota(n);
        for (std::size_t i = 0; i < n; ++i) iota[i] = static_cast<float>(i);
        std::vector<std::byte> msg(q->encoded_bytes(n));
        q->encode(iota, key, msg);
        const auto idx = randomk_indices(c, n, key);
        REQUIRE(idx.size() == q->kept(n));
        for (std::size_t i = 0; i < idx.size(); ++i) {
            float v;
            std::memcpy(&v, msg.data() + 4 * i, 4);
            CHECK(static_cast<std::uint64_t>(v) == idx[i]);
        }
        // Another key draws another set (for n large enough to have one).
        if (n >= 1000) CHECK(randomk_indices(c, n, {1, 2, n + 1}) != idx);
    }
}

TEST_CASE("codec_seed depends on the config's seed and on every part of the key") {
    CompressorConfig c;
    const auto base = codec_seed(c, {1, 2, 3});
    CHECK(codec_seed(c, {1, 2, 3}) == base);
    CHECK(codec_seed(c, {0, 2, 3}) != base);
    CHECK(codec_seed(c, {1, 0, 3}) != base);
    CHECK(codec_seed(c, {1, 2, 0}) != base);
    c.seed = 1;
    CHECK(codec_seed(c, {1, 2, 3}) != base);
}
