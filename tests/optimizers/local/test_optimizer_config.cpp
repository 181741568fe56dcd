#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/local/local_optimizer.hpp"
#include "gossamer/optimizers/local/lr_schedule.hpp"

using namespace gossamer::optim;
using gossamer::ConfigError;
namespace json = gossamer::json;

namespace {

// Parses {"optimizer": <text>} from "train.json" and reads the optimizer node.
OptimizerConfig optimizer(const std::string& text) {
    json::Node root(json::parse_text("{\"optimizer\": " + text + "}", "train.json"));
    return parse_optimizer(root.at("optimizer"));
}

LrSchedule schedule(const std::string& text, double base_lr = 0.1) {
    json::Node root(json::parse_text("{\"lr_schedule\": " + text + "}", "train.json"));
    return parse_schedule(root.at("lr_schedule"), base_lr);
}

template <typename F>
std::string config_error(F&& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "no ConfigError";
}

}  // namespace

TEST_CASE("optimizer configs are read with their defaults") {
    const auto s = optimizer(
        R"({"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": true, "weight_decay": 5e-4})");
    CHECK(s.kind == OptimizerKind::sgd);
    CHECK(s.lr == 0.1);
    CHECK(s.momentum == 0.9);
    CHECK(s.nesterov);
    CHECK(s.weight_decay == 5e-4);
    const auto a =
        optimizer(R"({"name": "adamw", "lr": 1e-3, "beta2": 0.98, "weight_decay": 0.01})");
    CHECK(a.kind == OptimizerKind::adamw);
    CHECK(a.beta1 == 0.9);
    CHECK(a.beta2 == 0.98);
    CHECK(a.eps == 1e-8);
    CHECK(optimizer(R"({"name": "adam", "lr": 2})").kind == OptimizerKind::adam);
    CHECK(make_optimizer(a, 4)->size() == 4);
}

TEST_CASE("schedule configs are read and bound to the base rate") {
    const auto c = schedule(
        R"({"schedule": "cosine", "warmup_steps": 100, "total_steps": 1100, "min_lr": 0.01})");
    CHECK(c.config().kind == ScheduleKind::cosine);
    CHECK(c.at(49) == doctest::Approx(0.05));
    CHECK(c.at(1100) == doctest::Approx(0.01));
    const auto s = schedule(R"({"schedule": "step", "step_size": 30})");
    CHECK(s.at(30) == doctest::Approx(0.01));  // gamma defaults to 0.1
    CHECK(schedule("{}").at(5) == 0.1);
}

TEST_CASE("every bad optimizer config is a ConfigError naming the file and JSON path") {
    struct Case {
        const char* text;
        const char* expect;  // the start of the message
    };
    const Case cases[] = {
        {R"({"name": "sgdd", "lr": 0.1})",
         "train.json: optimizer.name: unknown value \"sgdd\"; did you mean \"sgd\"?"},
        {R"({"name": "rmsprop", "lr": 0.1})", "train.json: optimizer.name: unknown value"},
        {R"({"lr": 0.1})", "train.json: optimizer: missing key \"name\""},
        {R"({"name": "sgd"})", "train.json: optimizer: missing key \"lr\""},
        {R"({"name": "sgd", "lr": 0.1, "momentun": 0.9})",
         "train.json: optimizer.momentun: unknown key \"momentun\"; did you mean \"momentum\"?"},
        {R"({"name": "sgd", "lr": 0})",
         "train.json: optimizer.lr: learning rate 0 must be finite and > 0"},
        {R"({"name": "adam", "lr": -0.001})", "train.json: optimizer.lr: learning rate -0.001"},
        {R"({"name": "sgd", "lr": "fast"})", "train.json: optimizer.lr: expected a number"},
        {R"({"name": "sgd", "lr": 0.1, "momentum": 1.0})",
         "train.json: optimizer.momentum: momentum 1 is outside [0, 1)"},
        {R"({"name": "sgd", "lr": 0.1, "nesterov": true})",
         "train.json: optimizer.nesterov: Nesterov momentum needs momentum > 0"},
        {R"({"name": "sgd", "lr": 0.1, "nesterov": 1})",
         "train.json: optimizer.nesterov: expected true or false"},
        {R"({"name": "sgd", "lr": 0.1, "weight_decay": -1})",
         "train.json: optimizer.weight_decay: weight decay -1 must be finite and >= 0"},
        {R"({"name": "sgd", "lr": 0.1, "beta1": 0.9})",
         "train.json: optimizer.beta1: \"beta1\" does not apply to sgd"},
        {R"({"name": "adam", "lr": 0.1, "momentum": 0.9})",
         "train.json: optimizer.momentum: \"momentum\" does not apply to adam"},
        {R"({"name": "adamw", "lr": 0.1, "beta2": 1.0})",
         "train.json: optimizer.beta2: beta2 1 is outside [0, 1)"},
        {R"({"name": "adam", "lr": 0.1, "eps": 0})",
         "train.json: optimizer.eps: eps 0 must be finite and > 0"},
        {R"(["sgd"])", "train.json: optimizer: expected an object"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        const auto msg = config_error([&] { optimizer(c.text); });
        CHECK(msg.find(c.expect) == 0);
        CHECK(msg.find('\n') == std::string::npos);
    }
}

TEST_CASE("every bad schedule config is a ConfigError naming the file and JSON path") {
    struct Case {
        const char* text;
        const char* expect;
    };
    const Case cases[] = {
        {R"({"schedule": "cosin", "total_steps": 10})",
         "train.json: lr_schedule.schedule: unknown value \"cosin\"; did you mean \"cosine\"?"},
        {R"({"schedule": "cosine", "warmup": 10, "total_steps": 10})",
         "train.json: lr_schedule.warmup: unknown key"},
        {R"({"schedule": "step"})", "train.json: lr_schedule: missing key \"step_size\""},
        {R"({"schedule": "step", "step_size": 0})", "train.json: lr_schedule.step_size: 0 is out"},
        {R"({"schedule": "step", "step_size": 5, "gamma": 0})",
         "train.json: lr_schedule.gamma: gamma 0 is outside (0, 1]"},
        {R"({"schedule": "step", "step_size": 5, "gamma": 1.5})",
         "train.json: lr_schedule.gamma: gamma 1.5"},
        {R"({"schedule": "cosine"})", "train.json: lr_schedule: missing key \"total_steps\""},
        {R"({"schedule": "cosine", "warmup_steps": 50, "total_steps": 50})",
         "train.json: lr_schedule.total_steps: total_steps 50 must exceed warmup_steps 50"},
        {R"({"schedule": "cosine", "total_steps": 50, "min_lr": 0.5})",
         "train.json: lr_schedule.min_lr: min_lr 0.5 is outside [0, 0.1]"},
        {R"({"schedule": "step", "step_size": 5, "min_lr": 0.01})",
         "train.json: lr_schedule.min_lr: \"min_lr\" does not apply to a step schedule"},
        {R"({"total_steps": 100})",
         "train.json: lr_schedule.total_steps: \"total_steps\" does not apply to a constant"},
        {R"({"warmup_steps": -5})", "train.json: lr_schedule.warmup_steps: -5 is out of range"},
        {R"({"warmup_steps": 2.5})", "train.json: lr_schedule.warmup_steps: expected an integer"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        const auto msg = config_error([&] { schedule(c.text); });
        CHECK(msg.find(c.expect) == 0);
    }
}

TEST_CASE("programmatic configs are validated too, including non-finite values") {
    OptimizerConfig c;
    c.lr = NAN;
    CHECK(config_error([&] { validate(c); }).find("optimizer.lr: ") == 0);
    c.lr = INFINITY;
    CHECK(config_error([&] { validate(c); }).find("optimizer.lr: ") == 0);
    c.lr = 0.1;
    c.beta1 = 0.5;
    CHECK(config_error([&] { validate(c); }).find("optimizer.beta1: ") == 0);
    c = {};
    c.kind = OptimizerKind::adam;
    c.momentum = 0.9;
    CHECK(config_error([&] { validate(c); }).find("optimizer.momentum: ") == 0);
    CHECK_NOTHROW(validate(OptimizerConfig{}));
}
