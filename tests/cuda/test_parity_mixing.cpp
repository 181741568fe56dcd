// Device mixing kernels against the CPU ones on the same inputs: bit-identical to the CPU FMA
// paths (AVX2, AVX-512), within one rounding per term of the scalar path (docs/operations/gpu.md).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/device.hpp"
#include "gossamer/core/mixing.hpp"
#include "gossamer/cuda/kernels.hpp"

namespace {

using gossamer::test::check_close;
using gossamer::test::cuda_device_or_skip;
using gossamer::test::download;
using gossamer::test::test_values;
using gossamer::test::upload;
namespace cuda = gossamer::cuda;

}  // namespace

TEST_CASE("cuda mix and mix_into match the CPU for 0 to 11 terms, aligned or not") {
    if (!cuda_device_or_skip()) return;
    const std::size_t n = 10007;
    for (std::size_t offset : {0, 1}) {
        for (int k : {0, 1, 3, 8, 11}) {
            CAPTURE(offset);
            CAPTURE(k);
            std::vector<std::vector<float>> host;
            std::vector<cuda::DeviceBuffer> dev;
            for (int j = 0; j <= k; ++j) {
                host.push_back(test_values(n + offset, 100 + j));
                dev.push_back(upload(host.back()));
            }
            std::vector<gossamer::MixTerm> cpu_terms;
            std::vector<cuda::DeviceTerm> gpu_terms;
            std::vector<float> magnitude(n, 0.0f);
            for (int j = 1; j <= k; ++j) {
                const float w = 1.0f / static_cast<float>(j + 2);
                cpu_terms.push_back({std::span<const float>(host[j]).subspan(offset), w});
                gpu_terms.push_back({dev[j].as<float>() + offset, w});
                for (std::size_t i = 0; i < n; ++i)
                    magnitude[i] += std::abs(w * host[j][i + offset]);
            }
            std::vector<float> x(host[0].begin() + offset, host[0].end());
            for (std::size_t i = 0; i < n; ++i) magnitude[i] += std::abs(0.25f * x[i]);
            gossamer::mix(x, 0.25f, cpu_terms);
            cuda::mix(dev[0].as<float>() + offset, 0.25f, gpu_terms, n);
            check_close(download(dev[0], n, offset), x, magnitude, k);

            cuda::DeviceBuffer out(n * sizeof(float));
            std::vector<float> into(n);
            gossamer::mix_into(into, cpu_terms);
            cuda::mix_into(out.as<float>(), gpu_terms, n);
            check_close(download(out, n), into, magnitude, k);
        }
    }
}

TEST_CASE("cuda delta, axpy, scale_copy and debias match the CPU") {
    if (!cuda_device_or_skip()) return;
    const std::size_t n = 4099;
    const auto a = test_values(n, 1), b = test_values(n, 2);
    auto da = upload(a), db = upload(b);
    cuda::DeviceBuffer out(n * sizeof(float));
    std::vector<float> ref(n), mag(n);
    for (std::size_t i = 0; i < n; ++i) mag[i] = std::abs(a[i]) + std::abs(b[i]);

    gossamer::delta(ref, a, b);
    cuda::delta(out.as<float>(), da.as<float>(), db.as<float>(), n);
    check_close(download(out, n), ref, mag, 1);

    gossamer::scale_copy(ref, 0.375f, a);
    cuda::scale_copy(out.as<float>(), 0.375f, da.as<float>(), n);
    check_close(download(out, n), ref, mag, 0);

    ref = b;
    gossamer::axpy(ref, -0.7f, a);
    cuda::axpy(db.as<float>(), -0.7f, da.as<float>(), n);
    check_close(download(db, n), ref, mag, 1);

    // sgp and async de-bias as static_cast<float>(x[k] / w_) with a double w_.
    const double w = 0.3;
    for (std::size_t i = 0; i < n; ++i) ref[i] = static_cast<float>(a[i] / w);
    cuda::debias(out.as<float>(), da.as<float>(), w, n);
    const auto z = download(out, n);
    CHECK(std::memcmp(z.data(), ref.data(), n * sizeof(float)) == 0);
}
