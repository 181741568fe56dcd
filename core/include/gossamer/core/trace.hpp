#pragma once
/// Timelines of a job as Chrome-trace / Perfetto JSON (docs/formats/trace.md): one process track
/// per peer with a "compute" thread (local steps and the waits between them) and a "messages"
/// thread (sends and receives per edge with bytes, failures), and a "job" track (evaluations).
///
/// Recording is cheap (an append of an 80-byte record, no formatting, no allocation once warm);
/// the file is written once, at the end. Its size is bounded: past max_events the recorder keeps
/// only whole steps k with k % every == 0 (doubling `every` and dropping the others), and says
/// so in the file, so sums over what is recorded stay exact. Single-threaded: one recorder per
/// driver thread (the simulator's loop, a real peer's communication loop).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"

namespace gossamer::trace {

/// What ended a wait (the neighbour and round waited for, where the driver knows it).
struct WaitCause {
    enum Kind : std::uint8_t { none, message, deadline, failure, start, finish };
    Kind kind = none;
    int peer = -1;            ///< message: its sender; failure: the failed peer
    std::int64_t round = -1;  ///< message: its round
};

/// Message kinds as the trace names them (transport::MessageKind's values, kept as numbers so
/// that core needs no transport header).
using KindNames = std::vector<std::string>;

/// Bytes one event takes in the file at most: max_events = limit / kMaxEventBytes.
inline constexpr std::size_t kMaxEventBytes = 256;
/// The job track's process id (evaluations of the whole job).
inline constexpr int kJobTrack = 1'000'000;

class Recorder {
  public:
    /// `clock`: "virtual" (simulator seconds) or "steady" (a real peer's seconds since its
    /// start, origin_unix_us its system-clock time then); limit_bytes bounds the file.
    Recorder(std::string clock, std::size_t limit_bytes, double origin_unix_us = 0);

    /// The messages track names a message kind k as kinds[k] (else "kind k").
    void set_kind_names(KindNames kinds) { kinds_ = std::move(kinds); }
    /// Extra facts for the file's otherData (algorithm, seed, ...).
    void set_info(const std::string& key, json::Json value) { info_[key] = std::move(value); }

    /// A local step of `peer` from start to end (seconds); closes the peer's current step slot.
    void step(int peer, double start, double end, std::int64_t step, double loss);
    /// Under "outer" (docs/formats/trace.md, "Outer rounds"): round `round` of `peer` from
    /// `start` to the last of `inner_ends`, one span "round r" (args: the round, H =
    /// `steps_per_round`, its inner steps, `loss`), and its inner steps inside it, step
    /// first_step + j from the previous end to inner_ends[j]. Closes the peer's current step
    /// slot once, as step() does, so sampling keeps or drops a round whole.
    void round(int peer, double start, std::span<const double> inner_ends, std::int64_t round,
               std::int64_t first_step, std::int64_t steps_per_round, double loss);
    /// `peer` sat idle from start to end; `cause` ended the wait.
    void wait(int peer, double start, double end, WaitCause cause);
    void send(int peer, double t, int to, std::uint64_t bytes, std::int64_t round, int kind);
    void receive(int peer, double t, int from, std::uint64_t bytes, std::int64_t round, int kind);
    /// `peer` itself failed (crashed, emulated failure) at t.
    void failure(int peer, double t);
    /// `peer` was told at t that `dead` failed.
    void peer_failed(int peer, double t, int dead);
    /// An evaluation from start to end: of the job's average (peer = kJobTrack) or of one
    /// peer's own model.
    void evaluation(int peer, double start, double end, double accuracy, double loss);

    /// Events kept now.
    std::size_t events() const noexcept { return events_.size(); }
    /// Sampling: whole steps k with k % every() == 0 are kept (1: everything).
    std::int64_t every() const noexcept { return every_; }
    std::size_t max_events() const noexcept { return max_events_; }

    /// Writes the file: at most limit_bytes of events, plus about 400 bytes of track names per
    /// peer and the otherData object.
    /// Throws ConfigError naming the path when it cannot be written.
    void write(const std::string& path) const;

  private:
    enum class Type : std::uint8_t {
        step,
        wait,
        send,
        receive,
        failure,
        peer_failed,
        evaluation,
        round,       // round: the round; bytes: H; other: its inner steps; value: loss
        inner_step,  // round: the inner step; bytes: its round
    };
    struct Event {
        double ts = 0, dur = 0;
        double value = 0, value2 = 0;  // loss; accuracy, loss
        std::int64_t slot = -1;        // the peer's step slot; -1: always kept
        std::int64_t round = -1;       // step index, message round
        std::uint64_t bytes = 0;
        std::int32_t pid = 0, other = -1;  // other: the peer at the edge's other end
        Type type = Type::step;
        std::uint8_t kind = 0;  // message kind, wait cause
    };
    std::int64_t& slot_of(int peer);
    void add(const Event& e);
    void compact();

    std::string clock_;
    double origin_unix_us_ = 0;
    std::size_t max_events_;
    std::int64_t every_ = 1;
    std::vector<Event> events_;
    std::vector<std::int64_t> slots_;  // per peer: its current step slot
    std::vector<std::uint8_t> seen_;   // per peer: whether it has a track
    int peers_seen_ = 0;
    KindNames kinds_;
    json::Json info_ = json::Json::object();
};

/// Merges the per-peer files of one job into `out`, shifting each file's times by its start on
/// rank 0's clock (origin_unix_us plus otherData.clock_offset.offset_us, the bootstrap's
/// estimate; without one, its host's clock as is) against the earliest one; the merged
/// otherData says how it was aligned and the largest residual (clock_residual_us). Throws
/// ConfigError naming a file that is missing or not a trace.
void merge_files(const std::vector<std::string>& inputs, const std::string& out);

/// `file` with "-tag" before its extension: one run's trace when a command runs several
/// (out/t.json, "dpsgd-seed0" -> out/t-dpsgd-seed0.json).
std::string tagged_path(const std::string& file, const std::string& tag);

/// Checks, before anything runs, that `path` can be written (a file name, its folder can be
/// made); throws ConfigError naming `flag` otherwise. Leaves no file behind.
void check_writable(const std::string& path, const std::string& flag);

/// Sums per peer over a parsed trace: seconds of steps and of waits, steps and waits counted.
struct PeerTotals {
    double busy = 0, idle = 0;
    std::int64_t steps = 0, waits = 0, sends = 0, receives = 0;
    std::uint64_t bytes_sent = 0;
};
/// Reads a trace file back (tests, gossamer report): totals by peer (pid), the job track left
/// out. Throws ConfigError for a file that does not parse as a trace.
std::vector<std::pair<int, PeerTotals>> read_totals(const std::string& path);

}  // namespace gossamer::trace
