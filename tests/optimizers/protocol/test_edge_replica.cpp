#include <doctest/doctest.h>

#include <algorithm>
#include <span>
#include <vector>

#include "gossamer/optimizers/protocol/edge_replica.hpp"

using gossamer::proto::ReplicaReceiver;
using gossamer::proto::ReplicaSender;
using gossamer::transport::Message;
using gossamer::transport::MessageKind;

namespace {

bool same(std::span<const float> a, std::span<const float> b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

}  // namespace

TEST_CASE("an edge applies messages in sequence order, whatever order they arrive in") {
    ReplicaSender tx(1, 3, true);
    ReplicaReceiver rx(0, 3, true);
    std::vector<Message> m;
    m.push_back(tx.encode(std::vector<float>{1, 2, 3}, 0));
    m.push_back(tx.encode(std::vector<float>{1.5f, 2, 2}, 1));
    m.push_back(tx.encode(std::vector<float>{0.1f, -2, 7}, 2));
    CHECK(m[0].kind == MessageKind::full_model);
    CHECK(m[1].kind == MessageKind::model_delta);
    CHECK(m[1].payload == std::vector<float>{0.5f, 0, -1});
    CHECK(tx.next_seq() == 3);

    rx.accept(m[0]);
    CHECK(rx.covers(0));
    rx.accept(m[2]);  // overtook message 1
    CHECK(rx.gaps() == 1);
    CHECK(rx.gap_open());
    rx.advance(5);
    CHECK_FALSE(rx.covers(1));  // nothing applied past the gap
    rx.accept(m[1]);
    rx.advance(1);  // message 2 belongs to a later round: it waits
    CHECK(rx.covers(1));
    CHECK_FALSE(rx.covers(2));
    rx.advance(2);
    CHECK(rx.covers(2));
    CHECK(same(rx.replica(), tx.replica()));
    CHECK(rx.next_seq() == 3);
    CHECK(rx.stale() == 0);
}

TEST_CASE("a full model re-syncs past a lost message and makes older ones stale") {
    ReplicaSender tx(1, 2, true);
    ReplicaReceiver rx(0, 2, true);
    rx.accept(tx.encode(std::vector<float>{1, 1}, 0));
    const Message lost = tx.encode(std::vector<float>{2, 2}, 1);
    rx.accept(tx.encode(std::vector<float>{3, 5}, 2));
    CHECK(rx.gaps() == 1);
    CHECK(tx.sent(1));
    CHECK_FALSE(tx.sent(3));
    const Message full = tx.resync();
    CHECK(full.kind == MessageKind::full_model);
    CHECK(full.edge_seq == 2);  // a re-sync takes no new number
    CHECK(full.round == 2);
    rx.accept(full);
    CHECK(rx.resyncs() == 1);
    CHECK(rx.stale() == 1);  // the queued message 2
    CHECK_FALSE(rx.gap_open());
    CHECK(rx.covers(2));
    rx.accept(lost);  // turns up after all
    CHECK(rx.stale() == 2);
    rx.accept(tx.encode(std::vector<float>{4, 4}, 3));
    rx.advance(3);
    CHECK(same(rx.replica(), std::vector<float>{4, 4}));
    CHECK(same(rx.replica(), tx.replica()));
}

TEST_CASE("cost-only edges number their messages but carry no values") {
    ReplicaSender tx(1, 1000, false);
    ReplicaReceiver rx(0, 1000, false);
    for (int r = 0; r < 3; ++r) {
        const Message m = tx.encode({}, r);
        CHECK(m.elements == 1000);
        CHECK(m.payload.empty());
        rx.accept(m);
        rx.advance(r);
        CHECK(rx.covers(r));
    }
    CHECK(rx.next_seq() == 3);
}
