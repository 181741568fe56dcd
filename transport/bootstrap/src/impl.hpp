// The state behind Bootstrap. Members marked "bootstrap thread" are touched only by handlers on
// `io`; the rest is shared with callers under `mu`.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "connection.hpp"
#include "gossamer/bootstrap/bootstrap.hpp"

namespace gossamer::bootstrap {

struct Bootstrap::Impl {
    asio::io_context io;  // first member, so it is destroyed last
    Options opt;
    int n = 0;
    bool count_only = false;        // the peers' addresses are learnt at the rendezvous (wire.hpp)
    std::uint64_t fingerprint = 0;  // wire::peers_fingerprint of the list as given
    Endpoint self;                  // where the listener is bound
    tcp::acceptor acceptor{io};
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
    std::thread thread;

    // Shared with callers, under mu.
    mutable std::mutex mu;
    std::condition_variable cv;
    ListenerStats stats;
    std::vector<PeerLoss> losses;
    std::function<void(const PeerLoss&)> on_lost;
    bool finished = false;  // the rendezvous ended (table or failure)
    std::optional<BootstrapError> failure;
    std::vector<Blob> table;
    std::vector<Endpoint> known_peers;  // peers(): the options', then the table's
    bool io_stopped = false;
    bool rendezvous_called = false;
    View view;                                 // the last installed
    std::optional<std::string> expelled_line;  // rank 0 declared this peer lost
    std::uint64_t view_answers = 0;            // view_install frames received
    bool root_lost = false;  // others: no coordinator connected (lost, the next not reached yet)
    /// The job's coordinator (docs/modules/bootstrap.md, "Succession"): rank 0 until it is lost,
    /// then the lowest rank of the installed view this peer has not lost. Written on the bootstrap
    /// thread under mu.
    int coord = 0;
    ClockOffset clock;  // others: set before finish() releases the caller

    // Bootstrap thread.
    std::vector<std::shared_ptr<Connection>> members;  // rank 0: by rank; others: [0] only
    std::vector<Blob> blobs;                           // rank 0: the blobs of joined ranks
    std::vector<bool> joined;                          // rank 0
    std::vector<bool> gone;                            // lost after the barrier
    bool own_blob_set = false;
    bool started = false;  // past the start-up barrier
    bool silenced = false;
    bool stopping = false;
    asio::steady_timer join_timer{io};
    asio::steady_timer heartbeat_timer{io};
    Clock::time_point last_beat{};
    Clock::time_point last_tick{};      // beat()'s previous run: a gap means this thread stopped
    std::optional<View> proposal;       // rank 0: proposed, not yet installed
    std::vector<bool> acks;             // rank 0: acknowledgements of `proposal`
    bool quiet_proposal = true;         // rank 0: `proposal` removes only peers that left
    std::vector<std::string> refusals;  // rank 0: why each rank's last handshake was refused
    std::deque<std::weak_ptr<Connection>> pending;  // accepted, no handshake yet (oldest first)
    // Succession (succession.cpp).
    bool coord_left = false;  // the coordinator this peer lost said goodbye (a job ending?)
    std::vector<Clock::time_point> awaited;  // new coordinator: not followed by then is lost
    struct Expel {
        std::shared_ptr<Connection> conn;
        std::string line;
    };
    // Coordinator: peers it lost, told so only once a view without them is installed (an
    // isolated coordinator, whose views never install, expels nobody).
    std::vector<std::optional<Expel>> expel_later;
    std::vector<std::pair<int, std::string>> held_reports;  // made while no coordinator answered
    // ask(): connections that sent a rejoin or a join and wait for the answer. The other side
    // may already watch one as a member's, so shutdown() says goodbye on them too.
    std::vector<std::weak_ptr<Connection>> asking;
    // Coordinator: losses it noticed while it heard from no other member (it is the one cut
    // off?), relayed only once a view without the lost rank is installed.
    std::vector<std::pair<int, wire::Bytes>> held_relays;
    // Joins (join.cpp).
    std::vector<int> admitted;               // coordinator: joined, not yet in an installed view
    std::vector<std::uint32_t> incarnation;  // coordinator: per rank, joins admitted so far
    // Coordinator: per joined rank, the members whose transports have not readmitted it yet;
    // the joiner gets its view when none is left (or at the timer).
    std::map<int, std::vector<int>> readmitting;
    std::vector<int> joins;  // ranks that joined the running job, in order (under mu)
    std::function<void(int, const Blob&)> on_joined;  // under mu
    // The listener's warnings: kWarningsShown per window, the rest counted and summed up.
    static constexpr int kWarningsShown = 3;
    int warnings_shown = 0;
    std::uint64_t warnings_held = 0;
    std::string last_held;
    bool warn_window_open = false;
    asio::steady_timer warn_timer{io};

    explicit Impl(Options options);

    bool is_coord() const { return coord == opt.rank; }

    /// "rank 3 (127.0.0.1:29503)"
    std::string name(int rank) const;
    /// This peer's system clock (plus Options::clock_skew), microseconds since the epoch.
    std::int64_t unix_us() const;

    // bootstrap.cpp: listener, shutdown, ending the rendezvous.
    void listen();
    void finish(std::vector<Blob> result);  // also publishes opt.peers as known_peers
    void fail(BootstrapError error);
    void shutdown();
    void crash();

    // listener.cpp
    asio::awaitable<void> accept_loop();
    void admit_pending(const std::shared_ptr<Connection>& conn);
    void refuse_garbage(Connection& conn, const std::string& why);
    void warn_listener(std::string line);
    void open_warn_window();  // arms warn_timer; its end calls close_warn_window(false)
    void close_warn_window(bool final);

    // rendezvous.cpp
    asio::awaitable<void> serve(std::shared_ptr<Connection> conn);
    /// joining: a join to the running job (join.cpp), not a hello before the barrier.
    std::optional<wire::Notice> check(const wire::Hello& hello, bool joining = false) const;
    void refuse(Connection& conn, int rank, wire::Notice notice);
    void start_as_root(Blob address);
    void maybe_release();
    /// Passes the start-up barrier with the ranks that joined: the table to them, view 0.
    void release();
    void give_up_join();
    asio::awaitable<void> join_root(Blob address);
    asio::awaitable<std::shared_ptr<Connection>> connect_root(Clock::time_point deadline);
    /// This peer's hello: who it is, what it runs, `address` (its blob) and where it listens.
    wire::Hello own_hello(Blob address, Endpoint listen) const;
    /// What a peer answered to `frame` (a rejoin or a join): welcome (`conn` open), a refusal,
    /// or neither (`error`: "unreachable (...)", "it did not answer within 5 s", ...).
    struct Answer {
        std::shared_ptr<Connection> conn;
        std::optional<wire::Notice> refusal;
        std::string error;
    };
    asio::awaitable<Answer> ask(int rank, const wire::Bytes& frame, Clock::time_point deadline);
    /// One attempt to reach `where` by `deadline`: the connection, or null and why.
    asio::awaitable<std::pair<std::shared_ptr<Connection>, std::string>> connect_once(
        const Endpoint& where, Clock::time_point deadline);
    /// Estimates `clock` from the round trips join_root made (a warning if it cannot).
    void set_clock(const std::vector<ClockSample>& samples);

    // heartbeat.cpp
    /// View 0 (every rank), set before the start-up barrier releases the caller.
    void install_first_view();
    /// View 0 from the table: the ranks with a blob (a job started without some, min_peers);
    /// the others are losses from the start.
    void absent_from_start(const std::vector<Blob>& table);
    /// Ranks that are out of the job before this peer's start (they did not come, or were lost
    /// before it joined): gone, outside the view, a loss each.
    void record_absent(const std::vector<PeerLoss>& absent);
    void start_heartbeats();
    void beat();
    /// Reads `conn` until it ends, `early` first (frames join_root read before the watch).
    asio::awaitable<void> watch(std::shared_ptr<Connection> conn, int rank,
                                std::vector<Frame> early = {});
    void lose(int rank, const std::string& line, bool forward, bool left = false);

    // views.cpp
    void propose_view(bool quiet);  // rank 0, after a loss (quiet: a goodbye)
    void on_view_ack(int rank, const wire::Notice& notice);
    void check_view();  // installs the proposal once a majority acked
    void send_view(int rank, wire::Kind kind, const View& v);
    void on_view_frame(const Frame& f);  // others: propose, install, expelled
    void answer_query(int rank);         // rank 0

    // succession.cpp: the next coordinator when the one a peer follows is lost.
    void succeed();    // the lowest live rank of the view: follow it, or take over
    void take_over();  // this peer becomes the coordinator
    asio::awaitable<void> follow(int rank, Clock::time_point deadline);
    asio::awaitable<void> serve_rejoin(std::shared_ptr<Connection> conn, wire::Hello hello);
    void expel_excluded(const View& installed);  // coordinator, at an install
    void refuse_rejoin(Connection& conn, Reason reason, std::string text);

    // join.cpp: a peer entering the running job (Bootstrap::join).
    asio::awaitable<void> serve_join(std::shared_ptr<Connection> conn, wire::Hello hello);
    asio::awaitable<void> join_running(Blob address);
    void announce_joins(const View& installed);  // coordinator, at an install
    void on_table_update(const Frame& f);        // followers, after the barrier
    void on_peer_joined(const Frame& f);         // followers
    void joined_callback(int rank);
    void on_readmitted(int member, int rank);  // coordinator
    void release_install(int rank);            // coordinator: the joiner's view, at last
    /// rendezvous() (joining false) or join(): starts the bootstrap thread's part, waits.
    std::vector<Blob> enter(std::span<const std::byte> address, bool joining);

    // suspect.cpp: failures only a transport saw.
    void report_failure(int rank, const std::string& why);
    void on_suspect(int reporter, const Frame& f);  // rank 0
    void judge_later(int reporter, int suspect, std::string why);
    void judge(int reporter, int suspect, const std::string& why);
};

/// Runs a coroutine on the bootstrap thread; an escaped exception is logged, never fatal.
void spawn(asio::io_context& io, asio::awaitable<void> task, const char* what);

}  // namespace gossamer::bootstrap
