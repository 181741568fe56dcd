#pragma once
/// Mixing kernels: x <- w_self*x + sum_j w_j*buf_j in ONE pass over memory, and the small vector
/// helpers protocols need (scaled copy, axpy, delta), on float32 spans.
///
/// Every function here is vectorised for x86-64 AVX2+FMA and AVX-512, picked once at run time
/// from the CPU, with a portable scalar fallback; all paths agree within float rounding (see
/// docs/modules/mixing.md for the grouping of neighbours, the stores and the tolerance).
///
/// Sizes: every input span must have the size of the output, otherwise gossamer::Error (checked
/// once per call, outside the loop). Aliasing: mix() and mix_into() throw gossamer::Error when
/// the output overlaps any term, even exactly (fold such a weight into w_self instead); terms may
/// alias each other. The helpers may run in place (output == an input, same pointer) but throw
/// when the output partially overlaps an input. Not thread-safe on the same output; different
/// outputs may be mixed from different threads.

#include <cstddef>
#include <span>

namespace gossamer {

/// One neighbour buffer and the weight given to it; data.size() must equal the output's size.
struct MixTerm {
    std::span<const float> data;
    float weight = 0;
};

/// Instruction sets the kernels are compiled for.
enum class SimdIsa { scalar, avx2, avx512 };

/// "scalar", "avx2" (AVX2 + FMA) or "avx512" (AVX-512F).
const char* to_string(SimdIsa isa) noexcept;
/// Parses the names to_string() gives; false when `name` is none of them.
bool parse_simd_isa(const char* name, SimdIsa& isa) noexcept;
/// Whether this CPU (and its OS) runs `isa`, and this build holds its kernels.
bool simd_isa_supported(SimdIsa isa) noexcept;
/// The widest supported set: what the free functions below use.
SimdIsa best_simd_isa() noexcept;

/// How results are written. `streaming` uses non-temporal stores, which bypass the caches and
/// skip reading the output's lines first: faster for outputs much larger than the last-level
/// cache that the kernel does not read, slower for outputs read again soon. `automatic` streams
/// outputs that are not read (mix_into, scale_copy, delta) and hold at least
/// streaming_threshold_bytes(); mix() and axpy() read their output and write it back regularly.
/// The scalar path always writes regularly.
enum class StorePolicy { automatic, regular, streaming };

/// "auto", "regular" or "streaming".
const char* to_string(StorePolicy stores) noexcept;
/// Parses the names to_string() gives; false when `name` is none of them.
bool parse_store_policy(const char* name, StorePolicy& stores) noexcept;

/// Output size in bytes from which StorePolicy::automatic streams: the last-level cache size
/// (sysconf; 32 MiB when unknown).
std::size_t streaming_threshold_bytes() noexcept;

/// The kernels for one instruction set and store policy. Cheap to construct and copy; the free
/// functions below use Mixer{} (best_simd_isa(), automatic stores). Tests and benchmarks build
/// one per path to compare them.
class Mixer {
  public:
    /// Throws gossamer::Error when `isa` is not supported here (simd_isa_supported()).
    explicit Mixer(SimdIsa isa = best_simd_isa(), StorePolicy stores = StorePolicy::automatic);

    SimdIsa isa() const noexcept { return isa_; }
    StorePolicy stores() const noexcept { return stores_; }
    /// Whether an output of n floats is written with streaming stores; reads_output is true for
    /// mix() and axpy(), false for the others.
    bool streams(std::size_t n, bool reads_output) const noexcept;

    /// x <- w_self*x + sum_j terms[j].weight * terms[j].data, any number of terms (0 scales x).
    void mix(std::span<float> x, float w_self, std::span<const MixTerm> terms) const;
    /// out <- sum_j terms[j].weight * terms[j].data; out is never read (0 terms give zeros).
    void mix_into(std::span<float> out, std::span<const MixTerm> terms) const;
    /// y <- a*x (y may be x: scales in place).
    void scale_copy(std::span<float> y, float a, std::span<const float> x) const;
    /// y <- y + a*x.
    void axpy(std::span<float> y, float a, std::span<const float> x) const;
    /// d <- x - x_hat (d may be x or x_hat).
    void delta(std::span<float> d, std::span<const float> x, std::span<const float> x_hat) const;

  private:
    SimdIsa isa_;
    StorePolicy stores_;
};

/// Mixer{}.mix(): x <- w_self*x + sum_j w_j*buf_j.
void mix(std::span<float> x, float w_self, std::span<const MixTerm> terms);
/// Mixer{}.mix_into(): out <- sum_j w_j*buf_j.
void mix_into(std::span<float> out, std::span<const MixTerm> terms);
/// Mixer{}.scale_copy(): y <- a*x.
void scale_copy(std::span<float> y, float a, std::span<const float> x);
/// Mixer{}.axpy(): y <- y + a*x.
void axpy(std::span<float> y, float a, std::span<const float> x);
/// Mixer{}.delta(): d <- x - x_hat.
void delta(std::span<float> d, std::span<const float> x, std::span<const float> x_hat);

}  // namespace gossamer
