#pragma once
/// The finiteness check of float vectors that guards every value a peer sends or takes in
/// (docs/operations/reliability.md, "Non-finite values"): one read-only pass, vectorised for AVX2
/// and AVX-512 (picked at run time, like the mixing kernels), that stops at the first block holding
/// a NaN or an infinity.

#include <cstddef>
#include <optional>
#include <span>

namespace gossamer {

/// The index of the first NaN or infinite value of v, or nullopt when every value is finite.
std::optional<std::size_t> first_non_finite(std::span<const float> v) noexcept;

/// The index of the value of v with the largest magnitude (the first of equals), or nullopt for
/// an empty v. For finite values only (first_non_finite first).
std::optional<std::size_t> largest_magnitude(std::span<const float> v) noexcept;

/// "NaN", "+inf" or "-inf": the name of a non-finite value (any finite value gives "+inf"/"-inf"
/// by its sign, so call it for non-finite values only).
const char* non_finite_name(float v) noexcept;

}  // namespace gossamer
