#pragma once
// Counts the heap bytes one thread asks for, for the simulator's allocation guard
// (test_sim_alloc.cpp, docs/operations/testing.md "Allocation guard"). alloc_counter.cpp replaces
// the global operator new and delete of the test binary it is linked into (test_sim_alloc only):
// every allocation carries its requested size in a header, so the figures are the sizes the
// code asked for, independent of malloc's rounding, of time and of the machine's RSS.

#include <cstdint>

namespace gossamer::test {

/// What the counting thread allocated while a CountingScope was open.
struct AllocCounts {
    std::uint64_t allocations = 0;  ///< calls to operator new
    std::uint64_t allocated = 0;    ///< bytes asked for, in all
    std::int64_t live = 0;          ///< bytes held now: allocated less what this thread freed
    std::int64_t peak = 0;          ///< the most bytes held at once
};

/// Counts the allocations and frees of the thread that opens it, until it closes (no nesting).
/// Frees on this thread of memory allocated before the scope lower `live`; allocations on
/// other threads are not counted.
class CountingScope {
  public:
    CountingScope();
    ~CountingScope();
    CountingScope(const CountingScope&) = delete;
    CountingScope& operator=(const CountingScope&) = delete;
    const AllocCounts& counts() const { return counts_; }

  private:
    AllocCounts counts_;
};

}  // namespace gossamer::test
