#include <doctest/doctest.h>

#include <limits>

#include "gossamer/transport/wire.hpp"

namespace tr = gossamer::transport;

namespace {

tr::HeaderExpectation expect(int receiver = 1, int size = 4) {
    tr::HeaderExpectation e;
    e.job_id = 42;
    e.receiver = receiver;
    e.size = size;
    e.max_payload = 1 << 20;
    return e;
}

std::vector<std::byte> encoded(const tr::Message& m, std::uint64_t job = 42) {
    std::vector<std::byte> h(tr::kHeaderBytes);
    tr::encode_header(m, job, std::span<std::byte, tr::kHeaderBytes>(h));
    return h;
}

tr::Message sample() {
    tr::Message m;
    m.kind = tr::MessageKind::reduce;
    m.sender = 3;
    m.receiver = 1;
    m.edge_seq = 0xfedcba9876543210ull;
    m.round = -5;
    m.partition = 7;
    m.chunk = 9;
    m.offset = 1ull << 40;
    m.codec = 2;
    m.weight = 1.0 / 3.0;
    m.sent_at = std::numeric_limits<double>::denorm_min();
    m.elements = 100;
    return m;
}

}  // namespace

TEST_CASE("the header round-trips every field, little-endian at fixed offsets") {
    const auto m = sample();
    auto h = encoded(m);
    CHECK(std::to_integer<int>(h[0]) == 'G');
    CHECK(std::to_integer<int>(h[6]) == static_cast<int>(tr::MessageKind::reduce));
    CHECK(tr::announced_payload_bytes(h) == 400);
    CHECK(tr::announced_sender(h) == 3);
    CHECK(tr::announced_sender(std::span<const std::byte>(h).first(10)) == -1);  // short
    tr::Message out;
    auto check = tr::decode_header(h, expect(), 400, out);
    REQUIRE(check.ok);
    CHECK(out.kind == m.kind);
    CHECK(out.sender == 3);
    CHECK(out.receiver == 1);
    CHECK(out.edge_seq == m.edge_seq);
    CHECK(out.round == -5);
    CHECK(out.partition == 7);
    CHECK(out.chunk == 9);
    CHECK(out.offset == m.offset);
    CHECK(out.codec == 2);
    CHECK(out.weight == m.weight);
    CHECK(out.sent_at == m.sent_at);
    CHECK(out.elements == 100);
    CHECK(tr::kHeaderBytes == 88);
}

TEST_CASE("header checks name the reason and the values") {
    tr::Message out;
    auto h = encoded(sample());
    CHECK(tr::decode_header(std::span(h).first(10), expect(), 400, out).reason ==
          tr::DropReason::short_header);
    auto bad = h;
    bad[1] = std::byte{0};
    CHECK(tr::decode_header(bad, expect(), 400, out).reason == tr::DropReason::bad_magic);
    bad = h;
    bad[5] = std::byte{1};
    CHECK(tr::decode_header(bad, expect(), 400, out).reason == tr::DropReason::bad_version);
    auto job = tr::decode_header(encoded(sample(), 43), expect(), 400, out);
    CHECK(job.reason == tr::DropReason::wrong_job);
    CHECK(job.detail == "job id 0x2b, expected 0x2a");
    bad = h;
    bad[6] = std::byte{0};
    CHECK(tr::decode_header(bad, expect(), 400, out).reason == tr::DropReason::bad_kind);
    CHECK(tr::decode_header(h, expect(2), 400, out).reason == tr::DropReason::wrong_receiver);
    CHECK(tr::decode_header(h, expect(1, 3), 400, out).reason == tr::DropReason::wrong_sender);
    auto e = expect();
    e.sender = 2;
    CHECK(tr::decode_header(h, e, 400, out).reason == tr::DropReason::wrong_sender);
    CHECK(tr::decode_header(h, expect(), 399, out).reason == tr::DropReason::bad_size);
    auto big = sample();
    big.elements = (1 << 20) / 4 + 1;
    CHECK(tr::decode_header(encoded(big), expect(), -1, out).reason == tr::DropReason::bad_size);
    bad = h;
    bad[64] = std::byte{0x91};  // payload bytes no longer 4 * elements
    CHECK(tr::decode_header(bad, expect(), -1, out).reason == tr::DropReason::bad_size);
}
