// Mixing: argument checks, run-time dispatch, grouping of many terms, and the scalar kernels.
#include "gossamer/core/mixing.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "gossamer/core/error.hpp"
#include "mixing_kernels.hpp"

namespace gossamer {
namespace mixing {
namespace {

// Portable kernels, same order of operations as the SIMD ones but with a separate rounding of
// each product (no FMA), so they agree within one rounding per term. The compiler may vectorise
// them for the baseline ISA.
template <int N, bool ReadOut>
void group_scalar(float* out, const float* const* src, const float* w, float w_out, std::size_t n,
                  bool /*stream: no portable non-temporal store*/) {
    const float* s[N > 0 ? N : 1] = {};
    float wj[N > 0 ? N : 1] = {};
    std::copy_n(src, N, s);
    std::copy_n(w, N, wj);
    for (std::size_t i = 0; i < n; ++i) {
        float acc = 0.0f;
        int j = 0;
        if constexpr (ReadOut) {
            acc = w_out * out[i];
        } else if constexpr (N > 0) {
            acc = wj[0] * s[0][i];
            j = 1;
        }
        for (; j < N; ++j) acc += wj[j] * s[j][i];
        out[i] = acc;
    }
}

template <int... N>
constexpr KernelTable scalar_table(std::integer_sequence<int, N...>) {
    return {{{&group_scalar<N, false>...}, {&group_scalar<N, true>...}}, nullptr};
}

}  // namespace

const KernelTable& scalar_kernels() {
    static constexpr KernelTable t = scalar_table(std::make_integer_sequence<int, kGroup + 1>{});
    return t;
}

}  // namespace mixing

namespace {

using mixing::KernelTable;
using mixing::kGroup;

// Elements of out mixed per block when more than kGroup terms need several kernel calls: the
// block (16 KiB) stays in L1 between the calls, so memory is still crossed once.
constexpr std::size_t kBlock = 4096;

const KernelTable* table_of(SimdIsa isa) {
    switch (isa) {
        case SimdIsa::scalar:
            return &mixing::scalar_kernels();
        case SimdIsa::avx2:
            return mixing::avx2_kernels();
        case SimdIsa::avx512:
            return mixing::avx512_kernels();
    }
    return nullptr;
}

bool cpu_runs(SimdIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();  // libgcc's check includes the OS saving the wider registers (XCR0)
    switch (isa) {
        case SimdIsa::scalar:
            return true;
        case SimdIsa::avx2:
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case SimdIsa::avx512:
            return __builtin_cpu_supports("avx512f");
    }
    return false;
#else
    return isa == SimdIsa::scalar;
#endif
}

std::uintptr_t address(const float* p) {
    return reinterpret_cast<std::uintptr_t>(p);
}

bool overlap(std::span<const float> a, std::span<const float> b) {
    if (a.empty() || b.empty()) return false;
    return address(a.data()) < address(b.data() + b.size()) &&
           address(b.data()) < address(a.data() + a.size());
}

void check_terms(const char* fn, const char* out_name, std::span<const float> out,
                 std::span<const MixTerm> terms) {
    for (std::size_t j = 0; j < terms.size(); ++j) {
        if (terms[j].data.size() != out.size())
            throw Error(fmt::format("{}: term {} has {} elements, {} has {}", fn, j,
                                    terms[j].data.size(), out_name, out.size()));
        if (overlap(out, terms[j].data))
            throw Error(
                fmt::format("{}: {} overlaps term {}; the output may not alias a term "
                            "(fold its weight into the self weight)",
                            fn, out_name, j));
    }
}

// For the helpers: same size, and either exactly in place or disjoint.
void check_input(const char* fn, std::span<const float> out, std::span<const float> in,
                 const char* in_name) {
    if (in.size() != out.size())
        throw Error(fmt::format("{}: {} has {} elements, the output has {}", fn, in_name, in.size(),
                                out.size()));
    if (in.data() != out.data() && overlap(out, in))
        throw Error(
            fmt::format("{}: the output partially overlaps {}; use the same buffer "
                        "(in place) or a disjoint one",
                        fn, in_name));
}

// out <- (read_out ? w_out*out : 0) + sum_j w_j*terms_j, in groups of kGroup terms.
void run(const KernelTable& t, bool stream, std::span<float> out, bool read_out, float w_out,
         std::span<const MixTerm> terms) {
    const std::size_t n = out.size(), k = terms.size();
    if (n == 0) return;
    stream = stream && t.fence != nullptr;
    const float* src[kGroup];
    float w[kGroup];
    if (k <= static_cast<std::size_t>(kGroup)) {
        for (std::size_t j = 0; j < k; ++j) src[j] = terms[j].data.data(), w[j] = terms[j].weight;
        t.fn[read_out][k](out.data(), src, w, w_out, n, stream);
    } else {
        // The first block also covers the unaligned head, so that later blocks start on a
        // 64-byte boundary like the kernels' aligned body. Only the last group streams.
        const auto misalign = address(out.data()) & 63u;
        const std::size_t head = ((64u - misalign) & 63u) / sizeof(float);
        for (std::size_t begin = 0; begin < n;) {
            const std::size_t len = std::min(n - begin, begin == 0 ? head + kBlock : kBlock);
            for (std::size_t g = 0; g < k; g += kGroup) {
                const std::size_t count = std::min<std::size_t>(kGroup, k - g);
                for (std::size_t j = 0; j < count; ++j) {
                    src[j] = terms[g + j].data.data() + begin;
                    w[j] = terms[g + j].weight;
                }
                const bool first = g == 0;
                t.fn[first ? read_out : true][count](out.data() + begin, src, w,
                                                     first ? w_out : 1.0f, len,
                                                     stream && g + count == k);
            }
            begin += len;
        }
    }
    if (stream) t.fence();
}

}  // namespace

const char* to_string(SimdIsa isa) noexcept {
    switch (isa) {
        case SimdIsa::scalar:
            return "scalar";
        case SimdIsa::avx2:
            return "avx2";
        case SimdIsa::avx512:
            return "avx512";
    }
    return "?";
}

bool parse_simd_isa(const char* name, SimdIsa& isa) noexcept {
    for (SimdIsa i : {SimdIsa::scalar, SimdIsa::avx2, SimdIsa::avx512}) {
        if (std::strcmp(name, to_string(i)) == 0) {
            isa = i;
            return true;
        }
    }
    return false;
}

bool simd_isa_supported(SimdIsa isa) noexcept {
    return table_of(isa) != nullptr && cpu_runs(isa);
}

const char* to_string(StorePolicy stores) noexcept {
    switch (stores) {
        case StorePolicy::automatic:
            return "auto";
        case StorePolicy::regular:
            return "regular";
        case StorePolicy::streaming:
            return "streaming";
    }
    return "?";
}

bool parse_store_policy(const char* name, StorePolicy& stores) noexcept {
    for (StorePolicy p : {StorePolicy::automatic, StorePolicy::regular, StorePolicy::streaming}) {
        if (std::strcmp(name, to_string(p)) == 0) {
            stores = p;
            return true;
        }
    }
    return false;
}

SimdIsa best_simd_isa() noexcept {
    static const SimdIsa best = simd_isa_supported(SimdIsa::avx512) ? SimdIsa::avx512
                                : simd_isa_supported(SimdIsa::avx2) ? SimdIsa::avx2
                                                                    : SimdIsa::scalar;
    return best;
}

std::size_t streaming_threshold_bytes() noexcept {
    static const std::size_t bytes = [] {
        const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
        return llc > 0 ? static_cast<std::size_t>(llc) : std::size_t{32} << 20;
    }();
    return bytes;
}

Mixer::Mixer(SimdIsa isa, StorePolicy stores) : isa_(isa), stores_(stores) {
    if (!simd_isa_supported(isa))
        throw Error(
            fmt::format("mixing: this CPU or build does not run the {} kernels", to_string(isa)));
}

// Automatic: stream only outputs that the kernel does not read (mix_into and the copies) and
// that do not fit in the LLC. A streaming store saves the read-for-ownership of a line that is
// not in cache; an output that was just read is in cache, and streaming it measured slower
// (docs/modules/mixing.md).
bool Mixer::streams(std::size_t n, bool reads_output) const noexcept {
    if (isa_ == SimdIsa::scalar) return false;
    return stores_ == StorePolicy::streaming ||
           (stores_ == StorePolicy::automatic && !reads_output &&
            n * sizeof(float) >= streaming_threshold_bytes());
}

void Mixer::mix(std::span<float> x, float w_self, std::span<const MixTerm> terms) const {
    check_terms("mix", "x", x, terms);
    run(*table_of(isa_), streams(x.size(), true), x, true, w_self, terms);
}

void Mixer::mix_into(std::span<float> out, std::span<const MixTerm> terms) const {
    check_terms("mix_into", "out", out, terms);
    run(*table_of(isa_), streams(out.size(), false), out, false, 0.0f, terms);
}

void Mixer::scale_copy(std::span<float> y, float a, std::span<const float> x) const {
    check_input("scale_copy", y, x, "x");
    const MixTerm t[] = {{x, a}};
    run(*table_of(isa_), streams(y.size(), false), y, false, 0.0f, t);
}

void Mixer::axpy(std::span<float> y, float a, std::span<const float> x) const {
    check_input("axpy", y, x, "x");
    const MixTerm t[] = {{x, a}};
    run(*table_of(isa_), streams(y.size(), true), y, true, 1.0f, t);  // 1*y is exact
}

void Mixer::delta(std::span<float> d, std::span<const float> x,
                  std::span<const float> x_hat) const {
    check_input("delta", d, x, "x");
    check_input("delta", d, x_hat, "x_hat");
    // 1*x is exact and the FMA (or the add) then rounds x - x_hat once, as a subtraction does.
    const MixTerm t[] = {{x, 1.0f}, {x_hat, -1.0f}};
    run(*table_of(isa_), streams(d.size(), false), d, false, 0.0f, t);
}

namespace {
const Mixer& default_mixer() {
    static const Mixer m;
    return m;
}
}  // namespace

void mix(std::span<float> x, float w_self, std::span<const MixTerm> terms) {
    default_mixer().mix(x, w_self, terms);
}
void mix_into(std::span<float> out, std::span<const MixTerm> terms) {
    default_mixer().mix_into(out, terms);
}
void scale_copy(std::span<float> y, float a, std::span<const float> x) {
    default_mixer().scale_copy(y, a, x);
}
void axpy(std::span<float> y, float a, std::span<const float> x) {
    default_mixer().axpy(y, a, x);
}
void delta(std::span<float> d, std::span<const float> x, std::span<const float> x_hat) {
    default_mixer().delta(d, x, x_hat);
}

}  // namespace gossamer
