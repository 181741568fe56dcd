// The CUDA Device (gossamer/optimizers/cuda/cuda_device.hpp) against the CPU code on the same
// inputs: memory, transfers (plain and staged), copy, mix, delta, axpy. Device cases skip
// themselves where there is none (optional component cuda-device); the refusal without a device
// runs everywhere.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/cuda_device_util.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/mixing.hpp"

using gossamer::test::check_close;
using gossamer::test::cuda_device_or_null;
using gossamer::test::get;
using gossamer::test::put;
using gossamer::test::same_bits;
using gossamer::test::test_values;
namespace proto = gossamer::proto;
namespace gcuda = gossamer::optim::cuda;

TEST_CASE("make_cuda_device refuses in one line without a device and names the device with one") {
    if (gossamer::cuda::device_count() == 0) {
        // The case that runs on machines without a GPU (CI).
        CHECK_THROWS_WITH_AS(gcuda::make_cuda_device(), doctest::Contains("no CUDA device: "),
                             gossamer::Error);
        try {
            gcuda::make_cuda_device();
        } catch (const gossamer::Error& e) {
            const std::string what = e.what();
            CHECK(what.find("; use device \"cpu\"") != std::string::npos);
            CHECK(what.find('\n') == std::string::npos);
        }
        return;
    }
    const auto d = gcuda::make_cuda_device();
    CHECK(d->name() == "cuda");
    CHECK(d->description() == gossamer::cuda::device_description());
}

TEST_CASE("cuda device memory is zeroed and transfers are exact, plain and staged, at any offset") {
    // 5 Mi floats (20 MiB) pass the staging threshold and span several 4 MiB chunks; the small
    // sizes go through one copy, or through staging when the threshold is 0.
    for (std::size_t threshold : {std::size_t{0}, std::size_t{4} << 20, ~std::size_t{0}}) {
        CAPTURE(threshold);
        gcuda::CudaDeviceOptions o;
        o.staging_min_bytes = threshold;
        const auto d = cuda_device_or_null(o);
        if (!d) return;
        for (std::size_t n : {1u, 1001u, 5u << 20}) {
            CAPTURE(n);
            proto::DeviceVector v(*d, n + 7);
            CHECK(get(*d, v.data(), n + 7) == std::vector<float>(n + 7, 0.0f));
            const auto x = test_values(n, 3);
            d->upload(v.data() + 3, x);  // a partition at an odd offset
            CHECK(same_bits(get(*d, v.data() + 3, n), x));
            const auto around = get(*d, v.data(), n + 7);
            for (std::size_t k : {0u, 1u, 2u}) CHECK(around[k] == 0.0f);
            for (std::size_t k = n + 3; k < n + 7; ++k) CHECK(around[k] == 0.0f);
        }
    }
}

TEST_CASE("cuda device upload_add adds as the CPU loop does, and copy is exact") {
    for (std::size_t threshold : {std::size_t{0}, std::size_t{4} << 20}) {
        gcuda::CudaDeviceOptions o;
        o.staging_min_bytes = threshold;
        const auto d = cuda_device_or_null(o);
        if (!d) return;
        // Growing sizes: the scratch upload_add uploads into is grown on the way.
        for (std::size_t n : {17u, 4099u, 5u << 20}) {
            CAPTURE(n);
            auto y = test_values(n + 5, 7);
            const auto src = test_values(n, 8);
            auto dy = put(*d, y);
            d->upload_add(dy.data() + 5, src);
            for (std::size_t k = 0; k < n; ++k) y[k + 5] += src[k];
            CHECK(same_bits(get(*d, dy.data(), n + 5), y));

            proto::DeviceVector copy(*d, n + 2);
            d->copy(copy.data() + 1, dy.data() + 5, n);
            CHECK(
                same_bits(get(*d, copy.data() + 1, n), std::vector<float>(y.begin() + 5, y.end())));
        }
    }
}

TEST_CASE("cuda device mix matches the CPU's fused mix for 0 to 11 terms at odd offsets") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    const std::size_t n = 10007;
    for (std::size_t offset : {0u, 3u}) {
        for (int k : {0, 1, 3, 8, 11}) {
            CAPTURE(offset);
            CAPTURE(k);
            std::vector<std::vector<float>> host;
            std::vector<proto::DeviceVector> dev;
            for (int j = 0; j <= k; ++j) {
                host.push_back(test_values(n + offset, 200 + j));
                dev.push_back(put(*d, host.back()));
            }
            // Weights in double, as the protocols hold them; rounded to float as gossip_mix.cpp.
            const double w_self = 1.0 / 3.0;
            std::vector<proto::DeviceTerm> terms;
            std::vector<gossamer::MixTerm> cpu_terms;
            std::vector<float> magnitude(n, 0.0f);
            for (int j = 1; j <= k; ++j) {
                const double w = 2.0 / (3.0 * (j + 1));
                terms.push_back({dev[j].data() + offset, w});
                cpu_terms.push_back(
                    {std::span<const float>(host[j]).subspan(offset), static_cast<float>(w)});
                for (std::size_t i = 0; i < n; ++i)
                    magnitude[i] += std::abs(static_cast<float>(w) * host[j][i + offset]);
            }
            std::vector<float> x(host[0].begin() + offset, host[0].end());
            for (std::size_t i = 0; i < n; ++i) magnitude[i] += std::abs(x[i] / 3);
            gossamer::mix(x, static_cast<float>(w_self), cpu_terms);
            d->mix(dev[0].data() + offset, w_self, terms, n);
            check_close(get(*d, dev[0].data() + offset, n), x, magnitude, k);
        }
    }
}

TEST_CASE("cuda device delta and axpy match the CPU, in place and at odd offsets") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    const std::size_t n = 4099, off = 1;
    const auto a = test_values(n + off, 21), b = test_values(n + off, 22);
    const std::vector<float> a0(a.begin() + off, a.end()), b0(b.begin() + off, b.end());
    std::vector<float> mag(n);
    for (std::size_t i = 0; i < n; ++i) mag[i] = std::abs(a0[i]) + std::abs(b0[i]);
    std::vector<float> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = a0[i] - b0[i];  // exact rounding: bit-identical

    auto da = put(*d, a), db = put(*d, b);
    proto::DeviceVector out(*d, n);
    d->delta(out.data(), da.data() + off, db.data() + off, n);
    CHECK(same_bits(get(*d, out.data(), n), ref));
    d->delta(da.data() + off, da.data() + off, db.data() + off, n);  // d = x
    CHECK(same_bits(get(*d, da.data() + off, n), ref));
    d->upload(da.data(), a);
    d->delta(db.data() + off, da.data() + off, db.data() + off, n);  // d = x_hat
    CHECK(same_bits(get(*d, db.data() + off, n), ref));

    d->upload(db.data(), b);
    auto y = b0;
    gossamer::axpy(y, -0.7f, a0);
    d->axpy(db.data() + off, -0.7f, da.data() + off, n);
    check_close(get(*d, db.data() + off, n), y, mag, 1);
}

TEST_CASE("cuda device divide, scale, debias and zero match the CPU's roundings bit for bit") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    const std::size_t n = 5003, off = 3;
    const auto a = test_values(n + off, 31);
    const std::vector<float> a0(a.begin() + off, a.end());
    std::vector<float> div(n), sc(n), db(n);
    for (std::size_t i = 0; i < n; ++i) {
        div[i] = a0[i] / 3.0f;                             // the all-reduce's average
        sc[i] = static_cast<float>(0.3 * a0[i]);           // a push-sum share, x = w z
        db[i] = static_cast<float>(a0[i] / 0.7000000001);  // z = x / w
    }
    auto da = put(*d, a);
    proto::DeviceVector out(*d, n);
    d->scale(out.data(), 0.3, da.data() + off, n);
    CHECK(same_bits(get(*d, out.data(), n), sc));
    d->debias(out.data(), da.data() + off, 0.7000000001, n);
    CHECK(same_bits(get(*d, out.data(), n), db));
    d->divide(da.data() + off, 3.0f, n);  // in place, at an odd offset
    CHECK(same_bits(get(*d, da.data() + off, n), div));
    d->scale(da.data() + off, 0.3, da.data() + off, n);  // y may be x
    d->zero(da.data(), off);
    const auto z = get(*d, da.data(), off);
    CHECK(z == std::vector<float>(off, 0.0f));
}

TEST_CASE("cuda device frees what it allocated and ignores nullptr") {
    const auto d = cuda_device_or_null();
    if (!d) return;
    CHECK(d->allocate(0) == nullptr);
    d->deallocate(nullptr, 0);
    // Far more than any GPU holds if deallocate leaked: 64 rounds of 4 GiB.
    for (int i = 0; i < 64; ++i) {
        proto::DeviceVector v(*d, std::size_t{1} << 30);
        CHECK(v.data() != nullptr);
    }
}
