// Argument checks of the device API: refused on the host with one clear Error, before any CUDA
// call, so these run without a device.
#include <doctest/doctest.h>

#include <cstdint>

#include "gossamer/core/error.hpp"
#include "gossamer/cuda/compress.hpp"
#include "gossamer/cuda/kernels.hpp"

namespace cuda = gossamer::cuda;

TEST_CASE("cuda mix refuses an output that overlaps a term, and null pointers") {
    // Host addresses stand in for device ones: the checks compare pointers only.
    float fake[16] = {};
    const cuda::DeviceTerm self[] = {{fake + 4, 0.5f}};
    CHECK_THROWS_WITH_AS(cuda::mix(fake, 0.5f, self, 8), doctest::Contains("overlaps term 0"),
                         gossamer::Error);
    const cuda::DeviceTerm null_term[] = {{nullptr, 0.5f}};
    CHECK_THROWS_WITH_AS(cuda::mix_into(fake, null_term, 8),
                         doctest::Contains("term 0 is a null pointer"), gossamer::Error);
    CHECK_THROWS_WITH_AS(cuda::delta(fake + 1, fake, fake + 8, 4),
                         doctest::Contains("partially overlaps"), gossamer::Error);
}

TEST_CASE("cuda debias refuses a zero or non-finite weight") {
    float fake[4] = {};
    CHECK_THROWS_WITH_AS(cuda::debias(fake, fake, 0.0, 4), doctest::Contains("non-zero"),
                         gossamer::Error);
    CHECK_THROWS_AS(cuda::debias(fake, fake, 1.0 / 0.0, 4), gossamer::Error);
}

TEST_CASE("cuda topk_encode refuses k outside [1, n] and n past the workspace") {
    // A workspace of 0 values allocates nothing, so this needs no device either.
    cuda::TopKWorkspace ws(0);
    float fake[4] = {};
    std::uint32_t out[8] = {};
    auto* bytes = reinterpret_cast<std::byte*>(out);
    CHECK_THROWS_WITH_AS(cuda::topk_encode(fake, 4, 0, bytes, ws), doctest::Contains("k = 0"),
                         gossamer::Error);
    CHECK_THROWS_WITH_AS(cuda::topk_encode(fake, 4, 5, bytes, ws), doctest::Contains("k = 5"),
                         gossamer::Error);
    CHECK_THROWS_WITH_AS(cuda::topk_encode(fake, 4, 2, bytes, ws),
                         doctest::Contains("workspace holds 0"), gossamer::Error);
    CHECK_THROWS_WITH_AS(cuda::int8_encode(fake, 4, 0, 1, bytes), doctest::Contains("block"),
                         gossamer::Error);
}
