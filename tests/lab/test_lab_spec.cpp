// The lab's names, addresses, rates and tc commands: pure functions, no root needed.
#include <doctest/doctest.h>

#include <string>

#include "gossamer/lab/shaping.hpp"
#include "gossamer/lab/spec.hpp"
#include "support/errors.hpp"

namespace lab = gossamer::lab;
using gossamer::test::config_error;
using gossamer::test::contains;

namespace {

std::string joined(const std::vector<std::string>& argv) {
    std::string s;
    for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
    return s;
}

}  // namespace

TEST_SUITE("lab") {
    TEST_CASE("interface names stay within the kernel's 15 characters for every slot and peer") {
        for (int slot : {0, 9, 99, lab::kSlots - 1})
            for (int peer : {0, 9, 99, lab::kMaxPeers - 1}) {
                CHECK(lab::peer_device(slot, peer).size() <= 15);
                CHECK(lab::bridge_port(slot, peer).size() <= 15);
                CHECK(lab::bridge_device(slot).size() <= 15);
                CHECK(lab::slot_of_netns(lab::peer_netns(slot, peer)) == slot);
            }
        CHECK(lab::peer_device(7, 3) == "gsm7p3");
        CHECK(lab::bridge_port(7, 3) == "gsm7b3");
        CHECK(lab::peer_netns(7, 3) == "gsm7-p3");
        CHECK(lab::lab_netns(7) == "gsm7-lab");
        CHECK(lab::slot_of_netns("gsm7-lab") == 7);
    }

    TEST_CASE("each job has its own /24 and a peer's address is rank + 1 in it") {
        CHECK(lab::subnet(0) == "10.213.0.0/24");
        CHECK(lab::subnet(255) == "10.213.255.0/24");
        CHECK(lab::peer_address(3, 0) == "10.213.3.1");
        CHECK(lab::peer_address(3, lab::kMaxPeers - 1) == "10.213.3.250");
    }

    TEST_CASE("job names and namespace names are parsed strictly") {
        CHECK(lab::parse_job("gsm12") == 12);
        CHECK(lab::parse_job("12") == 12);
        CHECK_FALSE(lab::parse_job("gsm256"));
        CHECK_FALSE(lab::parse_job("gsm012"));
        CHECK_FALSE(lab::parse_job("gsm"));
        CHECK_FALSE(lab::parse_job("lab3"));
        CHECK_FALSE(lab::slot_of_netns("gsm7"));
        CHECK_FALSE(lab::slot_of_netns("gsm7-x"));
        CHECK_FALSE(lab::slot_of_netns("gsm7-p"));
        CHECK_FALSE(lab::slot_of_netns("other-p1"));
        CHECK_FALSE(lab::slot_of_netns("gsm7-p250"));
    }

    TEST_CASE("rates are bits per second with tc's units") {
        CHECK(lab::parse_rate("100mbit") == 100e6);
        CHECK(lab::parse_rate("1Gbit") == 1e9);
        CHECK(lab::parse_rate("2.5e8") == 2.5e8);
        CHECK(lab::parse_rate("64kbit") == 64e3);
        CHECK_FALSE(lab::parse_rate("fast"));
        CHECK_FALSE(lab::parse_rate("0mbit"));
        CHECK_FALSE(lab::parse_rate("-1gbit"));
        CHECK_FALSE(lab::parse_rate("mbit"));
        CHECK(lab::format_rate(1e9) == "1 Gbit/s");
        CHECK(lab::format_rate(12.5e6) == "12.5 Mbit/s");
        CHECK(lab::format_rate(0) == "unlimited");
    }

    TEST_CASE("a spec that cannot be built is refused with one line naming the peer or link") {
        lab::LabSpec s;
        CHECK(contains(config_error([&] { lab::validate(s, "--peers"); }), "at least one peer"));
        s.peers.resize(3);
        s.peers[1].uplink = -1;
        CHECK(contains(config_error([&] { lab::validate(s, "x.json"); }), "peer 1"));
        s.peers[1].uplink = 0;
        s.links = {{0, 3, 1e6}};
        CHECK(contains(config_error([&] { lab::validate(s, "x.json"); }), "link 0 -> 3"));
        s.links = {{1, 1, 1e6}};
        CHECK(contains(config_error([&] { lab::validate(s, "x.json"); }), "itself"));
        s.links = {{0, 1, 1e6}, {0, 1, 2e6}};
        CHECK(contains(config_error([&] { lab::validate(s, "x.json"); }), "twice"));
        s.links = {{0, 1, 0}};
        CHECK(contains(config_error([&] { lab::validate(s, "x.json"); }), "> 0"));
        s.peers.resize(lab::kMaxPeers + 1);
        s.links.clear();
        CHECK(contains(config_error([&] { lab::validate(s, "x.json"); }), "at most 250"));
    }

    TEST_CASE(
        "shaping: an htb cap on the peer's veth, small packets first, a u32 class per capped "
        "link, downlink on the bridge port") {
        lab::LabSpec s;
        s.peers = {{100e6, 50e6}, {0, 0}, {0, 0}};
        s.links = {{0, 2, 20e6}, {1, 0, 10e6}};
        std::vector<std::string> c;
        for (const auto& argv : lab::shaping_commands(s, 4, 0)) c.push_back(joined(argv));
        CHECK(c[0] == "tc -n gsm4-p0 qdisc add dev gsm4p0 root handle 1: htb default 2");
        CHECK(contains(c[1], "classid 1:1 htb rate 100000000bit ceil 100000000bit"));
        // the leaves' guaranteed rates sum to the cap: 45 + 10 (small packets) + 20 <= 100
        CHECK(contains(c[2], "classid 1:2 htb rate 45000000bit ceil 100000000bit"));
        // a leaf queues about 50 ms of its rate, at least 256 KiB
        CHECK(c[3] == "tc -n gsm4-p0 qdisc add dev gsm4p0 parent 1:2 bfifo limit 625000");
        CHECK(contains(c[4], "classid 1:3 htb rate 10000000bit ceil 100000000bit"));
        CHECK(contains(c[4], "prio 0"));
        CHECK(contains(c[5], "parent 1:3 bfifo limit 262144"));
        CHECK(c[6] ==
              "tc -n gsm4-p0 filter add dev gsm4p0 parent 1: protocol ip prio 1 u32 match u16 "
              "0x0000 0xff80 at 2 flowid 1:3");
        CHECK(contains(c[7], "classid 1:102 htb rate 20000000bit ceil 20000000bit"));
        CHECK(contains(c[8], "parent 1:102 bfifo limit 262144"));
        CHECK(c[9] ==
              "tc -n gsm4-p0 filter add dev gsm4p0 parent 1: protocol ip prio 2 u32 "
              "match ip dst 10.213.4.3/32 flowid 1:102");
        // the downlink: the same tree on the bridge's end (small packets first there too)
        REQUIRE(c.size() == 17);
        CHECK(c[10] == "tc -n gsm4-lab qdisc add dev gsm4b0 root handle 1: htb default 2");
        CHECK(contains(c[11], "classid 1:1 htb rate 50000000bit ceil 50000000bit"));
        CHECK(contains(c[12], "classid 1:2 htb rate 45000000bit ceil 50000000bit"));
        CHECK(contains(c[13], "dev gsm4b0 parent 1:2 bfifo limit 312500"));
        CHECK(contains(c[14], "classid 1:3 htb rate 5000000bit ceil 50000000bit"));
        CHECK(contains(c[16], "u32 match u16 0x0000 0xff80 at 2 flowid 1:3"));
        // An uncapped peer still gets its qdiscs (so its bytes are counted), at kUnlimited.
        const auto u = lab::shaping_commands(s, 4, 2);
        CHECK(contains(joined(u[1]), "rate 100000000000bit"));
        CHECK(u.size() == 14);
    }

    TEST_CASE("the root qdisc's counters are read from tc -s output") {
        const std::string out =
            "qdisc htb 1: root refcnt 2 r2q 10 default 0x2 direct_packets_stat 0 direct_qlen 1000\n"
            " Sent 123456789 bytes 98765 pkt (dropped 0, overlimits 12 requeues 0)\n"
            " backlog 0b 0p requeues 0\n";
        const auto c = lab::parse_root_counters(out, "gsm0p0");
        CHECK(c.bytes == 123456789u);
        CHECK(c.packets == 98765u);
        const std::string other = "qdisc pfifo 10: parent 1:2 limit 1000p\n Sent 5 bytes 1 pkt\n";
        CHECK_THROWS_WITH_AS(lab::parse_root_counters(other, "gsm0p0"), doctest::Contains("gsm0p0"),
                             gossamer::Error);
    }
}
