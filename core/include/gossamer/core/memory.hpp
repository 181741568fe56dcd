#pragma once
/// How much memory a run may use, checked before it allocates (docs/operations/errors.md,
/// "Memory").
///
/// A size a user gives (a model's hidden layers, sim's --model-size, n peers) can ask for more
/// memory than the machine has; commands estimate what a run keeps and check it up front, so
/// the answer is one line naming the size and the limit instead of a std::bad_alloc (or the
/// kernel's OOM killer) half-way through.

#include <optional>
#include <string>
#include <string_view>

namespace gossamer {

/// The memory this process may still allocate, and what sets that limit.
struct MemoryLimit {
    double bytes = 0;
    std::string source;  ///< e.g. "MemAvailable in /proc/meminfo", "RLIMIT_AS (ulimit -v)"
};

/// The smallest of: MemAvailable in /proc/meminfo; RLIMIT_AS minus the address space mapped
/// now; the cgroup's memory.max minus memory.current. nullopt when none is known.
std::optional<MemoryLimit> memory_limit();

/// Throws ConfigError(file, path, "<what> needs about X of memory, more than the Y that
/// <source> leaves", fix) when `bytes` exceeds memory_limit(). `bytes` is a double because
/// the products of user-given sizes can exceed 64 bits.
void check_memory(double bytes, std::string_view what, const std::string& file,
                  const std::string& path, std::string_view fix);

/// Names what is being allocated while it lives. When an exception leaves the innermost
/// scope, its name is kept for failed_allocation(), so `main` can report a std::bad_alloc as
/// "out of memory while <what>".
class AllocationScope {
  public:
    explicit AllocationScope(std::string what);
    ~AllocationScope();
    AllocationScope(const AllocationScope&) = delete;
    AllocationScope& operator=(const AllocationScope&) = delete;

  private:
    std::string what_;
    int uncaught_;
};

/// What the innermost AllocationScope left by the last exception on this thread named, or "".
std::string failed_allocation();

}  // namespace gossamer
