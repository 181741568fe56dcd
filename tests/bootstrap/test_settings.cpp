// The handshake's settings (issue 16): one digest per field, so a refusal names the field and
// both sides' values, on the refused peer and on rank 0; the comparison itself.
#include <doctest/doctest.h>

#include "cluster.hpp"

using namespace gossamer::test;

namespace {

std::vector<bs::Setting> job_settings(const std::string& graph, int epochs) {
    return {bs::make_setting("topology graph", graph, graph + " (n = 3)",
                             "start every peer with the same topology file"),
            bs::make_setting("algorithm", "dpsgd", "dpsgd",
                             "start every peer with the same --algorithm"),
            bs::make_setting("epochs", std::to_string(epochs), std::to_string(epochs) + " epochs",
                             "start every peer with the same training config and --epochs")};
}

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE("settings: the first differing field is named with both values and its fix") {
        const auto mine = job_settings("ring", 3);
        CHECK_FALSE(bs::compare_settings(mine, mine));
        const auto m = bs::compare_settings(job_settings("complete", 80), mine);
        REQUIRE(m);
        CHECK(bs::mismatch_text(*m, 2, 0) ==
              "topology graph differs: rank 2 has complete (n = 3), rank 0 has ring (n = 3); "
              "start every peer with the same topology file (also differ: epochs)");
        // A field only one side sends differs too; the same words for other values show digests.
        auto fewer = mine;
        fewer.pop_back();
        const auto missing = bs::compare_settings(fewer, mine);
        REQUIRE(missing);
        CHECK(bs::mismatch_text(*missing, 1, 0) ==
              "epochs differ: rank 1 has nothing, rank 0 has 3 epochs; start every peer with "
              "the same training config and --epochs");
        auto same_words = mine;
        same_words[0] = bs::make_setting("topology graph", "other edges", "ring (n = 3)", "");
        const auto hidden = bs::compare_settings(same_words, mine);
        REQUIRE(hidden);
        CHECK(has(hidden->theirs, "ring (n = 3) (digest "));
        CHECK(hidden->theirs != hidden->mine);
        // Descriptions stay one short line.
        const auto long_one = bs::make_setting("model", "x", "b\n" + std::string(500, 'a'), "");
        CHECK(long_one.value.size() == bs::kMaxValueChars);
        CHECK(long_one.value.find('\n') == std::string::npos);
    }

    TEST_CASE(
        "settings: a peer with another graph or epochs is refused at the handshake, "
        "named on both sides") {
        auto peers = start_peers(3, [](int r, std::vector<bs::Endpoint> e) {
            auto o = quick_options(r, std::move(e));
            o.join_timeout = 1500ms;
            o.settings = job_settings(r == 2 ? "complete" : "ring", r == 2 ? 80 : 3);
            return std::optional<bs::Options>(o);
        });
        const auto t0 = std::chrono::steady_clock::now();
        auto out = rendezvous_all(peers);
        CHECK(std::chrono::steady_clock::now() - t0 < 5s);
        REQUIRE(out[2].failed);
        CHECK(out[2].reason == bs::Reason::setting_mismatch);
        CHECK_MESSAGE(has(out[2].error, "was refused by rank 0 ("), out[2].error);
        CHECK_MESSAGE(has(out[2].error,
                          "): topology graph differs: rank 2 has complete (n = 3), rank 0 has "
                          "ring (n = 3); start every peer with the same topology file (also "
                          "differ: epochs)"),
                      out[2].error);
        CHECK_FALSE(has(out[2].error, "secret"));
        // Rank 0 and the peer that joined give up at the barrier, naming the field.
        for (int r : {0, 1}) {
            CAPTURE(r);
            REQUIRE(out[r].failed);
            CHECK(out[r].reason == bs::Reason::missing_peers);
            CHECK(out[r].ranks == std::vector<int>{2});
            CHECK_MESSAGE(has(out[r].error, "topology graph differs: rank 2 has complete"),
                          out[r].error);
        }
        CHECK(peers[0]->listener_stats().refused == 1);
    }

    TEST_CASE("settings: peers that agree on every setting join") {
        auto peers = start_peers(3, [](int r, std::vector<bs::Endpoint> e) {
            auto o = quick_options(r, std::move(e));
            o.settings = job_settings("ring", 3);
            o.settings[0].fix = r == 1 ? "another fix" : o.settings[0].fix;  // stays local
            return std::optional<bs::Options>(o);
        });
        for (const auto& o : rendezvous_all(peers)) CHECK_MESSAGE(!o.failed, o.error);
    }
}
