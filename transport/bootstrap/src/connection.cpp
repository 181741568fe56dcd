#include "connection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace gossamer::bootstrap {

Connection::Connection(tcp::socket socket) : socket_(std::move(socket)) {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    remote_ =
        ec ? "an unknown address" : ep.address().to_string() + ":" + std::to_string(ep.port());
    auto here = socket_.local_endpoint(ec);
    if (!ec) local_ = here.address().to_string();
    socket_.set_option(tcp::no_delay(true), ec);
}

void Connection::send(wire::Bytes frame) {
    if (!socket_.is_open() || close_when_flushed_ || write_failed_) return;
    outbox_.push_back(std::move(frame));
    if (outbox_.size() == 1) write_next();
}

void Connection::write_next() {
    asio::async_write(socket_, asio::buffer(outbox_.front()),
                      [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                          if (ec) {
                              // Only the sending side is done: what the other side sent before
                              // it closed (rank 0's expelled notice to a peer that was stopped)
                              // is still read, and the reader then closes.
                              self->outbox_.clear();
                              self->write_failed_ = true;
                              boost::system::error_code ignored;
                              self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
                              if (self->close_when_flushed_) self->close();
                              return;
                          }
                          self->outbox_.pop_front();
                          if (!self->outbox_.empty())
                              self->write_next();
                          else if (self->close_when_flushed_)
                              self->close();
                      });
}

void Connection::close_after_flush() {
    close_when_flushed_ = true;
    if (outbox_.empty()) close();
}

void Connection::close() {
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
}

asio::awaitable<Frame> Connection::read(Clock::time_point deadline, std::uint32_t max_body) {
    // The timer cancels the read at the deadline; `state` tells the timeout apart from other
    // errors and keeps a late timer handler from cancelling a later read.
    struct State {
        bool done = false;
        bool expired = false;
    };
    auto state = std::make_shared<State>();
    auto timer = std::make_shared<asio::steady_timer>(socket_.get_executor());
    if (deadline != Clock::time_point::max()) {
        timer->expires_at(deadline);
        timer->async_wait([self = shared_from_this(), state](boost::system::error_code ec) {
            if (ec || state->done) return;
            state->expired = true;
            boost::system::error_code ignored;
            self->socket_.cancel(ignored);
        });
    }
    struct Finish {
        std::shared_ptr<State> state;
        std::shared_ptr<asio::steady_timer> timer;
        ~Finish() {
            state->done = true;
            timer->cancel();
        }
    } finish{state, timer};

    Frame f;
    boost::system::error_code ec;
    std::array<std::uint8_t, wire::kHeaderBytes> head{};
    co_await asio::async_read(socket_, asio::buffer(head),
                              asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
        f.header = wire::decode_header(head);
        if (f.header.length > max_body)
            throw wire::Malformed(
                fmt::format("a frame of kind {} announces {} body bytes, more "
                            "than the {} this point of the protocol allows",
                            static_cast<int>(f.header.kind), f.header.length, max_body));
        // 64 KiB at a time: memory follows the bytes that arrived, not what a header announced.
        constexpr std::size_t kChunk = 64u << 10;
        for (std::size_t got = 0; !ec && got < f.header.length;) {
            const std::size_t step = std::min<std::size_t>(kChunk, f.header.length - got);
            f.body.resize(got + step);
            co_await asio::async_read(socket_, asio::buffer(f.body.data() + got, step),
                                      asio::redirect_error(asio::use_awaitable, ec));
            got += step;
        }
    }
    if (ec) {
        if (state->expired) ec = asio::error::timed_out;
        throw boost::system::system_error(ec);
    }
    co_return f;
}

std::string seconds(std::chrono::milliseconds d) {
    return fmt::format("{:g} s", static_cast<double>(d.count()) / 1000.0);
}

}  // namespace gossamer::bootstrap
