// One TCP connection of the bootstrap: whole frames out in order (a queue, so heartbeats and
// notices never interleave), whole frames in with an optional deadline. Bootstrap thread only.
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// (keep the line above first)
#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <string>

#include "wire.hpp"

namespace gossamer::bootstrap {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Frame {
    wire::Header header;
    wire::Bytes body;
};

class Connection : public std::enable_shared_from_this<Connection> {
  public:
    explicit Connection(tcp::socket socket);

    /// Queues a whole frame. A write error ends the sending side only: the reader still gets
    /// what arrived before, then the end of the connection, and closes it.
    void send(wire::Bytes frame);
    /// Closes once the queued frames are written.
    void close_after_flush();
    void close();
    bool is_open() const { return socket_.is_open(); }

    /// Reads one frame. Throws wire::Malformed for bytes that are not a frame or a body longer
    /// than `max_body`, and boost::system::system_error for EOF, resets and
    /// asio::error::timed_out at `deadline`. The body grows with the bytes that arrive: a
    /// header alone costs no allocation.
    asio::awaitable<Frame> read(Clock::time_point deadline = Clock::time_point::max(),
                                std::uint32_t max_body = wire::kMaxBody);

    /// "ip:port" of the other side, as it was when the connection opened.
    const std::string& remote() const { return remote_; }
    /// This side's address (no port), as it was when the connection opened: the address the
    /// kernel chose to reach the other side. Empty when unknown.
    const std::string& local_address() const { return local_; }

    Clock::time_point last_heard = Clock::now();
    /// Accepted by the listener and not yet past its handshake (rank 0's pending set).
    bool pending = false;
    /// Closed by the listener to make room (Options::max_pending): not worth a warning each.
    bool evicted = false;

  private:
    void write_next();

    tcp::socket socket_;
    std::deque<wire::Bytes> outbox_;
    bool close_when_flushed_ = false;
    bool write_failed_ = false;
    std::string remote_;
    std::string local_;
};

/// "1.5 s", "30 s": durations in error lines.
std::string seconds(std::chrono::milliseconds d);

}  // namespace gossamer::bootstrap
