#pragma once
/// Seeded, reproducible random numbers: the same seed gives the same sequence on every platform
/// and compiler (unlike std:: distributions, whose algorithms are unspecified).

#include <cmath>
#include <cstdint>

namespace gossamer {

namespace detail {
__extension__ typedef unsigned __int128 uint128;
}  // namespace detail

/// SplitMix64 step: a good 64-bit mixer, used to derive independent seeds from (seed, index).
constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/// Derives a seed for stream `index` of a run seeded with `seed` (e.g. round t of a schedule).
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t index) noexcept {
    return splitmix64(splitmix64(seed) ^ splitmix64(index + 0x632BE59BD9B4E019ull));
}

/// xoshiro256** generator (Blackman & Vigna), seeded through SplitMix64.
class Rng {
  public:
    explicit Rng(std::uint64_t seed) noexcept {
        std::uint64_t x = seed;
        for (auto& s : s_) {
            x += 0x9E3779B97F4A7C15ull;
            s = splitmix64(x);
        }
    }

    std::uint64_t next() noexcept {
        const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const std::uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    /// Uniform double in [0, 1), 53 random bits.
    double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

    /// Uniform integer in [0, n) without modulo bias (Lemire's method); n > 0.
    std::uint64_t below(std::uint64_t n) noexcept {
        detail::uint128 m = static_cast<detail::uint128>(next()) * n;
        auto low = static_cast<std::uint64_t>(m);
        if (low < n) {
            const std::uint64_t threshold = -n % n;
            while (low < threshold) {
                m = static_cast<detail::uint128>(next()) * n;
                low = static_cast<std::uint64_t>(m);
            }
        }
        return static_cast<std::uint64_t>(m >> 64);
    }

    /// Standard normal deviate (Box-Muller; one value per call, deterministic).
    double normal() noexcept {
        double u1 = uniform();
        while (u1 <= 0.0) u1 = uniform();
        const double u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }

    /// The generator's whole state (a checkpoint saves it; set_state continues the sequence).
    void get_state(std::uint64_t (&out)[4]) const noexcept {
        for (int i = 0; i < 4; ++i) out[i] = s_[i];
    }
    void set_state(const std::uint64_t (&in)[4]) noexcept {
        for (int i = 0; i < 4; ++i) s_[i] = in[i];
    }

  private:
    static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
        return (x << k) | (x >> (64 - k));
    }
    std::uint64_t s_[4];
};

}  // namespace gossamer
