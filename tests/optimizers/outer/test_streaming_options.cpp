// Streaming fragments' options ("outer": {"fragments", "alpha", "overlap"}) and their refusals:
// each bad value is one ConfigError naming the file and the field, before anything runs.
#include <doctest/doctest.h>

#include <string>

#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/optimizers/outer/streaming_worker.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "support/errors.hpp"

using gossamer::test::config_error;
namespace optim = gossamer::optim;
namespace proto = gossamer::proto;

namespace {

optim::TrainingConfig config(const std::string& outer, const std::string& extra = "") {
    return optim::parse_training_config(gossamer::json::parse_text(
        R"({"data": {"name": "logreg_synthetic", "samples": 100, "features": 3},
            "model": {"name": "mlp", "hidden": [4]}, "optimizer": {"name": "sgd", "lr": 0.1},
            "training": {"batch_size": 5, "eval_every": 10}, "seed": 3)" +
            (outer.empty() ? "" : R"(, "outer": )" + outer) + extra + "}",
        "t.json"));
}

std::string error_of(const std::string& outer, const std::string& extra = "") {
    return config_error([&] { config(outer, extra); });
}

bool starts(const std::string& s, const std::string& prefix) {
    return s.rfind(prefix, 0) == 0;
}

}  // namespace

TEST_CASE("streaming: the options, their defaults and the handshake's line") {
    const auto plain = config(R"({"steps": 8})");
    CHECK_FALSE(plain.outer->streaming());
    CHECK(plain.outer->describe().find("fragments") == std::string::npos);  // as before
    const auto c = config(R"({"steps": 8, "fragments": 4})");
    REQUIRE(c.outer);
    CHECK(c.outer->streaming());
    CHECK(c.outer->fragments == 4);
    CHECK(c.outer->alpha == 0.0);  // the new anchor only (Streaming DiLoCo's 0.5 is explicit)
    CHECK(c.outer->overlap == 1);  // the sync travels during the next sub-round
    CHECK(c.outer->step_inner_steps() == 2);
    CHECK(c.outer->describe() == "H=8 sgd lr=1 momentum=0 fragments=4 alpha=0 overlap=1");
    // eval_every (10 inner steps) counts sub-rounds of 2: 5.
    CHECK(c.eval_every == 5);
    CHECK(optim::outer_rounds(41, *c.outer) == 21);
    // One fragment: no overlap by default; alpha 0 and overlap 0 are the plain layer's rule.
    const auto one = config(R"({"steps": 8, "fragments": 1, "alpha": 0})");
    CHECK(one.outer->overlap == 0);
    CHECK_FALSE(one.outer->identity());
    CHECK_FALSE(config(R"({"steps": 1, "fragments": 1})").outer->identity());
    // The config's partitions as fragments.
    const auto parts = config(R"({"steps": 4, "fragments": "partitions", "alpha": 0.25})",
                              R"(, "partitions": {"first": ["fc1"], "last": ["*"]})");
    CHECK(parts.outer->fragments == 2);
    CHECK(parts.outer->fragments_are_partitions);
    CHECK(parts.outer->describe() ==
          "H=4 sgd lr=1 momentum=0 fragments=2(partitions) alpha=0.25 overlap=1");
}

TEST_CASE("streaming: bad options are one line naming the field") {
    CHECK(starts(error_of(R"({"steps": 6, "fragments": 4})"),
                 "t.json: outer.fragments: 4 fragments do not divide a round of 6 inner steps"));
    CHECK(starts(error_of(R"({"steps": 8, "fragments": 0})"), "t.json: outer.fragments: 0 "));
    CHECK(starts(error_of(R"({"steps": 8, "fragments": "layers"})"),
                 "t.json: outer.fragments: expected a number of equal slices or \"partitions\""));
    CHECK(starts(error_of(R"({"steps": 8, "fragments": 2, "alpha": 1})"),
                 "t.json: outer.alpha: alpha 1 is outside [0, 1)"));
    CHECK(starts(error_of(R"({"steps": 8, "alpha": 0.5})"),
                 "t.json: outer.alpha: \"alpha\" is an option of streaming fragments"));
    CHECK(starts(error_of(R"({"steps": 8, "fragments": 1, "overlap": 1})"),
                 "t.json: outer.overlap: overlap 1 needs 2 fragments or more"));
    CHECK(starts(error_of(R"({"steps": 8, "fragments": 2, "overlap": 2})"),
                 "t.json: outer.overlap: overlap 2 sub-rounds; it is 0 or 1"));
    CHECK(starts(error_of(R"({"steps": 8, "fragments": "partitions"})"),
                 "t.json: outer.fragments: \"fragments\": \"partitions\" needs the config's"));
    CHECK(starts(error_of(R"({"steps": 3, "fragments": "partitions"})",
                          R"(, "partitions": {"first": ["fc1"], "last": ["*"]})"),
                 "t.json: outer.fragments: 2 fragments do not divide a round of 3"));
    CHECK(starts(error_of(R"({"seconds": 1, "reference_steps": 8, "fragments": 2})"),
                 "t.json: outer.fragments: streaming fragments sync on sub-rounds of \"steps\""));
    // More fragments than values: refused when the model is known.
    const auto many = config(R"({"steps": 4096, "fragments": 4096})");
    const auto data = optim::load_training_data(many);
    CHECK(starts(config_error([&] { optim::make_training_worker(many, data.train, 0, 2, 1); }),
                 "t.json: outer.fragments: 4096 fragments of a model of "));
}

TEST_CASE("streaming: only per-partition gossip syncs one fragment at a time") {
    const auto c = config(R"({"steps": 4, "fragments": 2})");
    const std::string ar = config_error(
        [&] { proto::check_outer_algorithm(c.outer, "allreduce", nullptr, c.doc.file); });
    CAPTURE(ar);
    CHECK(starts(ar,
                 "t.json: outer.fragments: allreduce sends the whole model every round, so 2 "
                 "fragments cannot sync one at a time (streaming fragments are a dpsgd and "
                 "choco feature)"));
    CHECK(ar.find('\n') == std::string::npos);
    for (const char* no : {"sgp", "async", "lsgd", "qallreduce"})
        CHECK_THROWS(proto::check_outer_algorithm(c.outer, no, nullptr, c.doc.file));
    for (const char* ok : {"dpsgd", "choco"})
        CHECK_NOTHROW(proto::check_outer_algorithm(c.outer, ok, nullptr, c.doc.file));
    // One fragment sends the whole model: every algorithm that takes "outer" takes it.
    const auto one = config(R"({"steps": 4, "fragments": 1})");
    for (const char* ok : {"allreduce", "dpsgd", "sgp", "async", "choco", "lsgd", "qallreduce"})
        CHECK_NOTHROW(proto::check_outer_algorithm(one.outer, ok, nullptr, one.doc.file));
}

TEST_CASE("streaming: the worker's fragments and their gossip phases") {
    const auto c = config(R"({"steps": 6, "fragments": 3})");
    const auto data = optim::load_training_data(c);
    auto w = optim::make_training_worker(c, data.train, 0, 2, 1);
    const auto* s = dynamic_cast<const optim::StreamingWorker*>(w.outer.get());
    REQUIRE(s);
    CHECK(optim::outer_options_of(*s) == &s->options());
    const auto& f = s->fragments();
    REQUIRE(f.count() == 3);
    CHECK(f.total() == w.trainer->size());
    CHECK(f[0].size - f[2].size <= 1);  // equal slices
    const auto* rates = s->multirate();
    REQUIRE(rates);
    CHECK(rates->per_partition_gossip());
    // Fragment p gossips on sub-rounds r with r % 3 == p.
    for (std::int64_t r = 0; r < 9; ++r)
        for (std::size_t p = 0; p < 3; ++p) {
            CAPTURE(r);
            CAPTURE(p);
            CHECK(rates->gossips(p, r) == (r % 3 == static_cast<std::int64_t>(p)));
            CHECK(rates->updates(p, r));  // every fragment steps locally every inner step
        }
    CHECK(s->steps_per_gradient() == 2);
}
