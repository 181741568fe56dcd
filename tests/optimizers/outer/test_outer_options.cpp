// The "outer" section (optim::parse_outer_options, the training config) and the refusals of the
// layer: each bad value is one ConfigError naming the file and the field, before anything runs.
#include <doctest/doctest.h>

#include <string>

#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
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

}  // namespace

TEST_CASE("outer: the section's values and defaults") {
    CHECK_FALSE(config("").outer);
    const auto c = config(R"({"steps": 8})");
    REQUIRE(c.outer);
    CHECK(c.outer->steps == 8);
    CHECK(c.outer->kind == optim::OuterKind::sgd);  // the bounded default: local SGD
    CHECK(c.outer->lr == 1.0);
    CHECK(c.outer->momentum == 0.0);
    CHECK(c.outer->partitions.empty());
    CHECK_FALSE(c.outer->identity());
    CHECK(config(R"({"steps": 1})").outer->identity());
    CHECK(c.eval_every == 2);  // 10 inner steps, read as rounds of 8: rounded up
    const auto d = config(R"({"steps": 4, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9,
                   "partitions": ["fc1"]})");
    CHECK(d.outer->kind == optim::OuterKind::nesterov);
    CHECK(d.outer->lr == 0.7);
    CHECK(d.outer->momentum == 0.9);
    CHECK(d.outer->describe() == "H=4 nesterov lr=0.7 momentum=0.9 partitions=fc1");
    CHECK(optim::outer_rounds(40, *d.outer) == 10);
    CHECK(optim::outer_rounds(41, *d.outer) == 11);
    CHECK(optim::outer_rounds(0, *d.outer) == 0);
    // Rounds by time: FedNova with a bounded scale by default; rounds by reference_steps.
    const auto t = config(R"({"seconds": 1.5, "reference_steps": 8})");
    CHECK(t.outer->timed());
    CHECK(t.outer->seconds == 1.5);
    CHECK(t.outer->normalize == optim::OuterNormalize::fednova);
    CHECK(t.outer->max_scale == 2.0);
    CHECK(t.outer->round_steps() == 8);
    CHECK(t.outer->max_round_steps() == 64);
    CHECK_FALSE(t.outer->identity());
    CHECK(optim::outer_rounds(41, *t.outer) == 6);
    CHECK(t.outer->describe() == "T=1.5s ref=8 fednova max_scale=2 sgd lr=1 momentum=0");
    const auto r = config(R"({"seconds": 2, "reference_steps": 4, "normalize": "none",
                   "optimizer": "delayed_nesterov", "lr": 0.7, "momentum": 0.9, "delay": 3})");
    CHECK(r.outer->kind == optim::OuterKind::delayed_nesterov);
    CHECK(r.outer->delay == 3);
    CHECK(r.outer->describe() == "T=2s ref=4 raw delayed_nesterov lr=0.7 momentum=0.9 delay=3");
}

TEST_CASE("outer: every bad value is one line naming the file and the field") {
    struct Case {
        const char* outer;
        const char* starts;
    };
    const Case cases[] = {
        {R"({})", "t.json: outer: \"steps\" (inner steps per round) or \"seconds\""},
        {R"({"steps": 0})", "t.json: outer.steps: 0 inner steps per round"},
        {R"({"steps": -3})", "t.json: outer.steps: -3 inner steps per round"},
        {R"({"steps": 2.5})", "t.json: outer.steps:"},
        {R"({"steps": 4, "lr": 0})", "t.json: outer.lr: outer learning rate 0 must be finite"},
        {R"({"steps": 4, "lr": -0.7})", "t.json: outer.lr: outer learning rate -0.7"},
        {R"({"steps": 4, "lr": "fast"})", "t.json: outer.lr:"},
        {R"({"steps": 4, "momentum": 1})", "t.json: outer.momentum: outer momentum 1 is outside"},
        {R"({"steps": 4, "momentum": -0.1})", "t.json: outer.momentum: outer momentum -0.1"},
        {R"({"steps": 4, "optimizer": "adam"})", "t.json: outer.optimizer:"},
        {R"({"steps": 4, "optimizer": "nesterov"})",
         "t.json: outer.momentum: Nesterov's outer step needs momentum > 0"},
        // Rounds by time and Delayed Nesterov (issue 41).
        {R"({"steps": 4, "seconds": 2})",
         "t.json: outer.seconds: a round is either \"steps\" inner steps or \"seconds\" long"},
        {R"({"seconds": 0, "reference_steps": 8})", "t.json: outer.seconds: 0 seconds per round"},
        {R"({"seconds": -1, "reference_steps": 8})", "t.json: outer.seconds: -1 seconds"},
        {R"({"seconds": 2})", "t.json: outer.reference_steps: rounds by time need the common"},
        {R"({"seconds": 2, "reference_steps": 0})", "t.json: outer.reference_steps: rounds by"},
        {R"({"steps": 4, "reference_steps": 8})",
         "t.json: outer.reference_steps: \"reference_steps\" belongs to rounds by time"},
        {R"({"steps": 4, "normalize": "fednova"})", "t.json: outer.normalize: \"normalize\""},
        {R"({"seconds": 2, "reference_steps": 8, "normalize": "mean"})",
         "t.json: outer.normalize:"},
        {R"({"seconds": 2, "reference_steps": 8, "max_scale": 0.5})",
         "t.json: outer.max_scale: max_scale 0.5 must be finite and >= 1"},
        {R"({"steps": 4, "delay": 2})",
         "t.json: outer.delay: \"delay\" belongs to the delayed_nesterov outer optimizer"},
        {R"({"steps": 4, "optimizer": "delayed_nesterov", "momentum": 0.9, "delay": 0})",
         "t.json: outer.delay: a delay of 0 rounds"},
        {R"({"steps": 4, "optimizer": "delayed_nesterov", "delay": 2})",
         "t.json: outer.momentum: Nesterov's outer step needs momentum > 0"},
        {R"({"steps": 4, "period": 2})", "t.json: outer.period:"},
        {R"({"steps": 4, "partitions": ["fc1", "fc1"]})",
         "t.json: outer.partitions[1]: partition \"fc1\" is named twice"},
        {R"({"steps": 4, "partitions": []})", "t.json: outer.partitions:"},
        {R"(4)", "t.json: outer:"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.outer);
        const std::string e = error_of(c.outer);
        CAPTURE(e);
        CHECK(e.rfind(c.starts, 0) == 0);
        CHECK(e.find('\n') == std::string::npos);
    }
    // multirate rates and outer rounds together are refused at the section.
    const std::string e =
        error_of(R"({"steps": 4})", R"(, "partitions": {"fast": ["fc2"], "slow": ["*"]},
                 "multirate": {"partitions": {"slow": {"period": 4}}})");
    CHECK(e.rfind("t.json: outer: multirate partitions cannot be combined", 0) == 0);
}

TEST_CASE("outer: an unknown partition name is refused when the worker is built") {
    const auto c = config(R"({"steps": 4, "partitions": ["fc9"]})",
                          R"(, "partitions": {"first": ["fc1"], "last": ["*"]})");
    const auto data = optim::load_training_data(c);
    const std::string e =
        config_error([&] { optim::make_training_worker(c, data.train, 0, 4, 1); });
    CAPTURE(e);
    CHECK(e.rfind("t.json: outer.partitions: no partition \"fc9\" in first [0, ", 0) == 0);
    const auto ok = config(R"({"steps": 4, "partitions": ["first"]})",
                           R"(, "partitions": {"first": ["fc1"], "last": ["*"]})");
    CHECK(optim::make_training_worker(ok, data.train, 0, 4, 1).outer);
}

TEST_CASE("outer: the algorithms that cannot take it refuse it by name") {
    const auto c = config(R"({"steps": 4})");
    const std::string gadmm =
        config_error([&] { proto::check_outer_algorithm(c.outer, "gadmm", nullptr, c.doc.file); });
    CHECK(gadmm.rfind("t.json: outer: gadmm takes local steps of its own", 0) == 0);
    CHECK(gadmm.find("or run allreduce, dpsgd, sgp, async, choco, lsgd or qallreduce") !=
          std::string::npos);
    const auto period = gossamer::json::parse_text(R"({"period": 4})", "o.json");
    const gossamer::json::Node node(period);
    const std::string ar = config_error(
        [&] { proto::check_outer_algorithm(c.outer, "allreduce", &node, c.doc.file); });
    CHECK(ar.rfind("t.json: outer: allreduce with \"period\" > 1 is local SGD already", 0) == 0);
    for (const char* ok : {"allreduce", "dpsgd", "sgp", "async", "choco", "lsgd", "qallreduce"})
        CHECK_NOTHROW(proto::check_outer_algorithm(c.outer, ok, nullptr, c.doc.file));
    // The identity (H = 1, outer sgd at lr 1) is no layer at all: nothing to refuse.
    const auto id = config(R"({"steps": 1})");
    CHECK_NOTHROW(proto::check_outer_algorithm(id.outer, "gadmm", nullptr, id.doc.file));
}
