#pragma once
/// Start-up of a job of real peers over TCP (docs/modules/bootstrap.md): every peer listens at its
/// host:port, joins rank 0 (the rendezvous) with a handshake that checks protocol version, job,
/// token, peer list, model size, partition layout and the job's settings, and gets back every
/// peer's opaque address blob (the UCX worker address) once all n have joined: that is the start-up
/// barrier. Afterwards a background thread exchanges heartbeats with rank 0 and reports peers that
/// vanish. The handshake also compares every Setting of the job (settings.hpp), one digest per
/// field.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gossamer/bootstrap/clock.hpp"
#include "gossamer/bootstrap/error.hpp"
#include "gossamer/bootstrap/settings.hpp"
#include "gossamer/core/partition.hpp"

namespace gossamer::bootstrap {

/// Where a peer listens (topology file: peers[r]). Port 0 means "not known up front": in a
/// count-only job (docs/modules/bootstrap.md, "Count-only jobs") each peer knows only rank 0's
/// endpoint (the rendezvous) and its own bind address, and learns the others' from the table.
struct Endpoint {
    std::string host;
    int port = 0;
    std::string str() const { return host + ":" + std::to_string(port); }
};

using Blob = std::vector<std::byte>;
using Millis = std::chrono::milliseconds;

struct Options {
    int rank = 0;
    /// Rank r listens at peers[r]; all peers pass the same list, or (a count-only job) every
    /// peer passes rank 0's endpoint at peers[0], its own bind address at peers[rank] (port 0:
    /// a port the kernel gives; host 0.0.0.0: every interface, and the peer reports the address
    /// it reached rank 0 from) and port 0 for the others.
    std::vector<Endpoint> peers;
    std::uint64_t job_id = 0;      ///< must match on every peer
    std::string token;             ///< job_token(); compared in constant time by rank 0
    std::uint64_t model_size = 0;  ///< parameters of the model; must match
    PartitionLayout layout;        ///< must match (fingerprint; errors show describe())
    /// Everything else the peers must agree on (topology, algorithm, training inputs...): each
    /// field's digest must match rank 0's, and a peer sending other fields is refused too.
    std::vector<Setting> settings;

    Millis join_timeout{30000};  ///< start-up barrier: all n peers joined (rank 0's clock)
    /// Rank 0 only: when not all n peers joined within join_timeout but at least this many
    /// (rank 0 included) did, the job starts without the others instead of failing: they are
    /// lost from the start (a PeerLoss each, outside view 0) and may join later (join()).
    /// 0: every peer must join (the default).
    int min_peers = 0;
    /// Rank 0 with min_peers: ranks it does not wait for at the start-up barrier (they join
    /// later, the cluster file's join_at: docs/operations/elastic.md). The job starts as soon as
    /// every other rank joined, at least min_peers of them; the late ones are lost from the start
    /// as above. Ranks from 1 to n - 1.
    std::vector<int> late;
    Millis io_timeout{5000};          ///< one connect, or one handshake reply
    Millis retry_interval{200};       ///< between attempts to reach rank 0
    Millis heartbeat_interval{1000};  ///< a heartbeat is sent this often
    Millis heartbeat_timeout{5000};   ///< silence after which a peer counts as vanished
    /// The listener warns about the first few refused connections, then sums up the others in
    /// one line per warn_interval (a port scan or a flood must not flood the log).
    Millis warn_interval{10000};
    /// Connections that have not sent their handshake yet, at most (docs/operations/reliability.md,
    /// "Security"): past it the oldest is closed, so idle connections (a slow-loris) hold no
    /// more than this many descriptors and buffers and never keep a peer of the job out. Each
    /// also has io_timeout to send its handshake.
    int max_pending = 64;
    /// Clock round trips a joiner makes with rank 0 after its handshake (clock_offset()); at
    /// least 1.
    int clock_samples = 8;
    /// Tests only: added to this peer's system clock wherever the bootstrap reads it (a host
    /// whose clock is that far ahead).
    std::chrono::microseconds clock_skew{0};
};

/// A peer that left: no heartbeat for heartbeat_timeout, a reset connection, or a goodbye.
struct PeerLoss {
    int rank = -1;
    std::string reason;  ///< one line: "rank 3 (127.0.0.1:29503) vanished: no heartbeat for 5 s"
    /// True when the peer said goodbye (its Bootstrap was destroyed: it left on purpose), false
    /// when it vanished (silence, a reset or closed connection: a crash or a hang).
    bool left = false;
};

/// The job's membership as rank 0 last installed it (docs/modules/bootstrap.md, "Views"). View 0 is
/// every rank, from the start-up barrier on. When rank 0 loses peers it proposes the view
/// without them; the view is installed (and sent to its members) once a strict majority of the
/// previous view, rank 0 included, acknowledged it. So a view is always a majority-confirmed
/// successor of the one before: two peers stopped at once are not removed one by one behind
/// the back of a majority, and a side without a majority never installs one.
struct View {
    std::uint64_t number = 0;
    std::vector<int> members;  ///< ascending
    bool contains(int rank) const;
};

/// A peer's answer about itself (Bootstrap::confirm_membership).
enum class Standing {
    member,    ///< still in the job's view
    expelled,  ///< rank 0 declared it lost (expelled() says why)
    unknown,   ///< no answer in time, or rank 0 is gone: it cannot tell
};

/// Counters of what the listener refused (it keeps serving after each).
struct ListenerStats {
    std::uint64_t malformed = 0;  ///< connections that sent bytes that are not a handshake
    std::uint64_t refused = 0;    ///< well-formed handshakes that did not match
    std::uint64_t evicted = 0;    ///< closed without a handshake: past Options::max_pending
};

/// Faults a test can inject into one peer (Bootstrap::inject_fault).
enum class Fault {
    silence,  ///< stop sending heartbeats, keep the connections (a hung process)
    crash,    ///< close every socket without a goodbye (a killed process)
};

class Bootstrap {
  public:
    /// Binds this peer's listener at options.peers[options.rank] and starts the bootstrap thread.
    /// Throws BootstrapError (address_in_use, cannot_listen, bad_rank), or ConfigError for a
    /// timeout that is not positive or a heartbeat_timeout under two heartbeat intervals.
    explicit Bootstrap(Options options);
    /// Says goodbye to the connected peers (they report this peer as gone) and stops the thread.
    ~Bootstrap();
    Bootstrap(const Bootstrap&) = delete;
    Bootstrap& operator=(const Bootstrap&) = delete;

    /// Joins the job with this peer's address blob and returns every peer's blob (index = rank)
    /// once all n peers have joined. Blocks at most join_timeout (rank 0), or until rank 0 answers
    /// (others: unreachable after join_timeout of retries; after joining, until rank 0 sends the
    /// table or gives up). Throws BootstrapError; the message names the ranks and the reason.
    /// Call once.
    std::vector<Blob> rendezvous(std::span<const std::byte> address);

    /// Enters a job that is already running, instead of rendezvous() (docs/modules/bootstrap.md,
    /// "Joining a running job"): asks rank 0, then every other rank whose address it knows, for
    /// the job's coordinator, which checks this peer like a hello (job, token, peer list, model,
    /// layout, settings) and admits it if its rank is not a live member. Returns every peer's
    /// blob once a view that holds this peer is installed; ranks outside that view count as
    /// lost (lost_peers()). Throws BootstrapError: refused (the line names the field), or
    /// unreachable ("no running job to join ...") after join_timeout. Call once, instead of
    /// rendezvous().
    std::vector<Blob> join(std::span<const std::byte> address);
    /// Called on the bootstrap thread for every peer that joins the running job, with its new
    /// blob, once a view that holds it is installed (thread-safe to set; set it before
    /// rendezvous()). Must return quickly and not call back into this object.
    void on_peer_joined(std::function<void(int rank, const Blob& blob)> callback);
    /// Tells the coordinator that this peer's transport replaced `rank`'s endpoint after
    /// on_peer_joined (thread-safe, returns at once): the joiner is told its view once every
    /// member did, or after io_timeout, so its first messages are not dropped.
    void readmitted(int rank);
    /// The ranks that joined the running job so far, in order (thread-safe).
    std::vector<int> joined_peers() const;

    /// Called on the bootstrap thread for every peer that leaves after the rendezvous (rank 0
    /// sees every peer; the others see rank 0 and what rank 0 forwards). Must return quickly and
    /// not call back into this object. Set it before rendezvous().
    void on_peer_lost(std::function<void(const PeerLoss&)> callback);
    /// The peers lost so far, in the order they were noticed, less those that joined the
    /// running job again since (thread-safe).
    std::vector<PeerLoss> lost_peers() const;

    /// The last view installed (thread-safe; rank 0 installs, the others learn it).
    View agreed_view() const;
    /// Set when rank 0 declared this peer lost (it was stopped or cut off past the heartbeat
    /// timeout): rank 0's line. Thread-safe.
    std::optional<std::string> expelled() const;
    /// Asks whether this peer is still a member, for a peer that found a gap in its own loop:
    /// others ask rank 0 (and wait at most `timeout` for its answer); rank 0 waits one heartbeat
    /// interval for the others' resets to arrive and counts itself a member while a majority
    /// of its view is still connected. Blocks the caller, never the bootstrap thread.
    Standing confirm_membership(Millis timeout);

    /// Reports that this peer's transport failed `rank` on its own (a send timeout on a cut
    /// edge, a broken endpoint), with its line (thread-safe, returns at once). Rank 0 waits one
    /// heartbeat interval (a goodbye may be on its way), then declares `rank` lost, or the
    /// reporter when `rank` is 0, unless one of them is gone by then: the job agrees on every
    /// failure, not only on those its heartbeats see (docs/modules/bootstrap.md, "Transport
    /// failures").
    void report_failure(int rank, std::string why);

    /// This peer's system clock against rank 0's, estimated from clock_samples round trips
    /// right after the handshake (docs/modules/bootstrap.md, "Clock offsets"): set once
    /// rendezvous() returned; rank 0's is {0, 0, 0}. Thread-safe.
    ClockOffset clock_offset() const;

    /// What the listener refused so far (thread-safe).
    ListenerStats listener_stats() const;
    /// The address the listener is bound to.
    const Endpoint& endpoint() const noexcept;
    /// Every peer's listen address as known now: the options' list, and after the rendezvous
    /// of a count-only job what each peer reported (rank 0's entry stays as given). Thread-safe.
    std::vector<Endpoint> peers() const;
    int rank() const noexcept;

    /// Fault injection for tests: make this peer look hung or killed to the others.
    void inject_fault(Fault fault);

    struct Impl;

  private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace gossamer::bootstrap
