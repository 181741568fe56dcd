// The training config's "multirate" section: good and bad.
#include <doctest/doctest.h>

#include <string>

#include "gossamer/core/models.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "support/errors.hpp"

using gossamer::test::config_error;
namespace optim = gossamer::optim;
namespace proto = gossamer::proto;

namespace {

// An MLP 3-4-2 (layers fc1, fc2) split into fast = fc2 and slow = the rest.
const std::string kBase = R"("data": {"name": "logreg_synthetic", "samples": 100, "features": 3},
    "model": {"name": "mlp", "hidden": [4]}, "optimizer": {"name": "sgd", "lr": 0.1},
    "partitions": {"fast": ["fc2"], "slow": ["*"]})";

optim::Multirate rates(const std::string& multirate) {
    auto c = optim::parse_training_config(
        gossamer::json::parse_text("{" + kBase + ", \"multirate\": " + multirate + "}", "t.json"));
    auto model = gossamer::models::mlp(3, {4}, 2);
    return optim::build_multirate(c, optim::build_partitions(c, *model));
}

}  // namespace

TEST_CASE("multirate: periods, gossip periods and compressors are read per partition") {
    auto m = rates(R"({"partitions": {"slow": {"period": 4, "compressor": {"name": "int8"}}}})");
    const auto slow = *m.layout().find("slow"), fast = *m.layout().find("fast");
    CHECK(m.active());
    CHECK(m.per_partition_gossip());
    CHECK(m.backward() == optim::BackwardMode::skip);
    CHECK(m.rate(slow).period == 4);
    CHECK(m.rate(slow).gossip_period == 4);  // defaults to the period
    REQUIRE(m.rate(slow).compressor.has_value());
    CHECK(m.rate(slow).compressor->kind == optim::CompressorKind::int8);
    CHECK(m.rate(fast).period == 1);
    CHECK_FALSE(m.rate(fast).compressor.has_value());
    // Phase: a period-4 partition updates on steps 3, 7, 11, ...
    CHECK_FALSE(m.updates(slow, 0));
    CHECK(m.updates(slow, 3));
    CHECK(m.updates(slow, 7));
    auto g =
        rates(R"({"backward": "full", "partitions": {"slow": {"period": 2, "gossip_period": 1}}})");
    CHECK(g.backward() == optim::BackwardMode::full);
    CHECK_FALSE(g.per_partition_gossip());
    CHECK_FALSE(rates("{}").active());
}

TEST_CASE("multirate: bad partitions, periods and compressors name their JSON path and fix") {
    auto starts = [](const std::string& section, const std::string& text) {
        const std::string e = config_error([&] { rates(section); });
        CAPTURE(e);
        CHECK(e.rfind(text, 0) == 0);
        return e;
    };
    auto e = starts(R"({"partitions": {"slwo": {"period": 4}}})",
                    "t.json: multirate.partitions.slwo: unknown partition \"slwo\"; the layout "
                    "has slow, fast");
    CHECK(e.find("name one of those") != std::string::npos);
    starts(R"({"partitions": {"slow": {"period": 0}}})",
           "t.json: multirate.partitions.slow.period: period 0 must be an integer >= 1");
    starts(R"({"partitions": {"slow": {"period": 2.5}}})",
           "t.json: multirate.partitions.slow.period: period 2.5 must be an integer >= 1");
    starts(R"({"partitions": {"slow": {"gossip_period": -1}}})",
           "t.json: multirate.partitions.slow.gossip_period: gossip_period -1 must be");
    starts(R"({"partitions": {"slow": {"compressor": {"name": "zip"}}}})",
           "t.json: multirate.partitions.slow.compressor.name: unknown value \"zip\"");
    starts(R"({"partitions": {"slow": {"compressor": {"name": "topk", "fraction": 2}}}})",
           "t.json: multirate.partitions.slow.compressor.fraction:");
    starts(R"({"partitions": {"slow": {"period": 2}, "fast": {"period": 3}}})",
           "t.json: multirate.partitions: every partition has a period above 1");
    starts(R"({"partitions": {"slow": {"perod": 2}}})",
           "t.json: multirate.partitions.slow.perod: unknown key \"perod\"; did you mean");
    starts(R"({"backward": "some"})", "t.json: multirate.backward: unknown value \"some\"");
    starts(R"({"partitions": [1]})", "t.json: multirate.partitions: expected an object");
    CHECK(config_error([] {
              optim::parse_training_config(
                  gossamer::json::parse_text("{" + kBase + ", \"multirate\": 3}", "t.json"));
          }).rfind("t.json: multirate: expected an object", 0) == 0);
}

TEST_CASE("multirate: per-partition gossip is refused for algorithms other than dpsgd, choco") {
    auto m = rates(R"({"partitions": {"slow": {"period": 4}}})");
    proto::check_multirate_algorithm(m, "dpsgd");
    proto::check_multirate_algorithm(m, "choco");
    const std::string e = config_error([&] { proto::check_multirate_algorithm(m, "sgp"); });
    CHECK(e.rfind("t.json: multirate.partitions.slow: sgp gossips the whole model", 0) == 0);
    CHECK(e.find("run dpsgd") != std::string::npos);
    // Local multirate alone works with any algorithm.
    proto::check_multirate_algorithm(
        rates(R"({"partitions": {"slow": {"period": 4, "gossip_period": 1}}})"), "sgp");
}

TEST_CASE("multirate: the example configs of experiment 4 load and give the rates they say") {
    const std::string dir = std::string(GOSSAMER_SOURCE_DIR) + "/examples/sim/";
    auto model = gossamer::models::mlp(784, {256, 128}, 10);
    struct Case {
        const char* file;
        int period, gossip_period;
        bool fp16;
    };
    for (const Case& c : {Case{"fashion_mlp16_multirate.json", 4, 4, false},
                          Case{"fashion_mlp16_multirate_fp16.json", 4, 4, true},
                          Case{"fashion_mlp16_multirate_k2.json", 2, 2, false},
                          Case{"fashion_mlp16_slow_gossip.json", 1, 4, false},
                          Case{"fashion_mlp16_slow_gossip_fp16.json", 1, 4, true}}) {
        CAPTURE(c.file);
        const auto config = optim::load_training_config(dir + c.file);
        const auto m = optim::build_multirate(config, optim::build_partitions(config, *model));
        REQUIRE(m.count() == 2);
        const auto slow = *m.layout().find("slow"), fast = *m.layout().find("fast");
        CHECK(m.layout()[fast].size == 128 * 10 + 10);  // fc3
        CHECK(m.rate(slow).period == c.period);
        CHECK(m.rate(slow).gossip_period == c.gossip_period);
        CHECK(m.rate(slow).compressor.has_value() == c.fp16);
        CHECK(m.rate(fast).period == 1);
        proto::check_multirate_algorithm(m, "dpsgd");
    }
}
