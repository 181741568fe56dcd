#pragma once
/// Benchmark ranks as real processes: N children forked before the parent touches UCX or starts a
/// thread, each talking to the parent over its own pair of pipes with framed messages. Every
/// wait has a timeout; a child that dies, throws or goes silent is reported by rank.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace gossamer::bench {

/// One framed message: a type byte and bytes.
struct Frame {
    char type = 0;
    std::vector<std::byte> data;
};

/// Writes all of `n` bytes to `fd`; throws gossamer::Error when the other end is gone.
void write_all(int fd, const void* data, std::size_t n);
/// Reads exactly `n` bytes from `fd`; throws gossamer::Error on end of file or a read error.
void read_all(int fd, void* data, std::size_t n);

/// Puts the calling thread on CPU `cpu` modulo the CPUs present (no-op on one CPU).
void pin_to_cpu(int cpu);

/// The child's end of its pipes.
class RankChannel {
  public:
    RankChannel(int rank, int in, int out) : rank_(rank), in_(in), out_(out) {}
    int rank() const noexcept { return rank_; }
    void send(char type, const void* data = nullptr, std::size_t bytes = 0) const;
    /// The next frame from the parent; throws Timeout after `timeout`, Error when it is gone.
    Frame receive(std::chrono::milliseconds timeout) const;
    /// Tells the parent this rank is ready ('R'), then waits for its go ('G'), calling `idle`
    /// (when given) about every millisecond meanwhile.
    void barrier(std::chrono::milliseconds timeout, const std::function<void()>& idle = {}) const;

  private:
    int rank_, in_, out_;
};

/// The parent's side: forks the ranks at construction; the destructor kills those still alive.
class ForkedRanks {
  public:
    /// Runs body(channel) in each of n children. A child that returns exits 0; one that throws
    /// sends its message as an 'E' frame and exits 1.
    ForkedRanks(int n, const std::function<void(RankChannel&)>& body);
    ~ForkedRanks();
    ForkedRanks(const ForkedRanks&) = delete;
    ForkedRanks& operator=(const ForkedRanks&) = delete;

    int size() const noexcept { return static_cast<int>(pids_.size()); }
    /// The next frame of `rank`, which must have type `expect`. Throws gossamer::Error naming
    /// the rank when it reported an error, died (with its exit status), sent something else or
    /// sent nothing within `timeout` (what: what was awaited, for the message).
    Frame receive(int rank, char expect, std::chrono::milliseconds timeout,
                  const std::string& what);
    void send(int rank, char type, const void* data = nullptr, std::size_t bytes = 0);
    /// Waits for every rank's 'R', then sends each a 'G'.
    void barrier(std::chrono::milliseconds timeout, const std::string& what);
    /// Waits up to `timeout` for every child to exit 0; throws naming the first that did not.
    void join(std::chrono::milliseconds timeout);

  private:
    std::string died(int rank);
    /// "rank R was killed by signal S" for a child that died by a signal (waits up to 0.5 s), or
    /// "" when none did.
    std::string killed_rank();

    std::vector<pid_t> pids_;
    std::vector<int> to_, from_;
};

}  // namespace gossamer::bench
