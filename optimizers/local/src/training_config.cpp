#include "gossamer/optimizers/local/training_config.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <limits>

#include "gossamer/core/error.hpp"
#include "gossamer/core/idx.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/core/models.hpp"
#include "gossamer/core/synthetic.hpp"
#include "gossamer/core/text.hpp"

namespace gossamer::optim {
namespace {

// The run length a config's schedule is validated for when it loads, before the real one is
// known.
constexpr std::int64_t kLongestRun = std::numeric_limits<std::int32_t>::max();

using json::Node;

DataConfig parse_data(const Node& node) {
    DataConfig d;
    d.name = node.at("name").as_enum(
        {"fashion-mnist", "logreg_synthetic", "least_squares_synthetic", "bible-kjv", "text"});
    if (d.name == "bible-kjv" || d.name == "text") {
        if (d.name == "text")
            node.expect_object({"name", "file", "chars", "stride"});
        else
            node.expect_object({"name", "chars", "stride"});
        if (d.name == "text") {
            d.file = node.at("file").as_string();
            if (d.file.empty()) node.at("file").fail("empty file name", "give a text file");
        }
        if (auto v = node.find("chars")) d.chars = v->as_int(0, 1LL << 40);
        if (auto v = node.find("stride")) d.stride = static_cast<int>(v->as_int(1, 1 << 20));
        return d;
    }
    if (d.name == "fashion-mnist") {
        node.expect_object({"name", "dir", "train_limit", "test_limit"});
        if (auto v = node.find("dir")) d.dir = v->as_string();
        if (auto v = node.find("train_limit")) d.train_limit = v->as_int(0, 60000);
        if (auto v = node.find("test_limit")) d.test_limit = v->as_int(0, 10000);
        return d;
    }
    if (d.name == "logreg_synthetic")
        node.expect_object({"name", "samples", "test_samples", "features", "seed"});
    else
        node.expect_object({"name", "samples", "test_samples", "features", "noise", "seed"});
    d.samples = node.at("samples").as_int(1, 100'000'000);
    d.test_samples = node.find("test_samples") ? node.at("test_samples").as_int(0, 100'000'000) : 0;
    d.features = static_cast<int>(node.at("features").as_int(1, 1'000'000));
    if (auto v = node.find("seed")) d.seed = static_cast<std::uint64_t>(v->as_int(0));
    if (auto v = node.find("noise")) {
        d.noise = v->as_double();
        if (d.noise < 0) v->fail("noise must be >= 0");
    }
    return d;
}

// The text, its vocabulary, the last 10% for validation, windows of the model's context.
TrainingData load_text_data(const TrainingConfig& c) {
    const DataConfig& dc = c.data;
    std::string text =
        dc.name == "bible-kjv" ? read_bible_kjv("data.name") : read_text_file(dc.file, "data.file");
    if (dc.chars > 0 && static_cast<std::size_t>(dc.chars) < text.size())
        text.resize(static_cast<std::size_t>(dc.chars));
    const std::string vocab = vocabulary_of(text);
    const std::size_t valid = text.size() / 10, train = text.size() - valid;
    const auto window = static_cast<std::size_t>(dc.context) + 1;
    if (valid < window || vocab.size() < 2)
        throw ConfigError(c.doc.file, "model.context",
                          fmt::format("context {} needs windows of {} characters, but the "
                                      "validation split (the last 10% of the {} characters of "
                                      "\"{}\") holds {}{}",
                                      dc.context, window, text.size(), dc.name, valid,
                                      vocab.size() < 2 ? " and the text has one character" : ""),
                          fmt::format("use a context of at most {}, or more text (\"chars\")",
                                      valid > 1 ? valid - 1 : 1));
    TrainingData d;
    const std::string_view all(text);
    d.train = text_windows(all.substr(0, train), vocab, dc.context, dc.stride, dc.name + "/train");
    d.test =
        text_windows(all.substr(train), vocab, dc.context, dc.context, dc.name + "/validation");
    return d;
}

}  // namespace

TrainingConfig parse_training_config(const json::Document& doc) {
    Node root(doc);
    root.expect_object({"description", "seed", "data", "model", "optimizer", "schedule", "training",
                        "partitions", "multirate", "output", "sharding", "algorithms", "guard",
                        "outer"});
    TrainingConfig c;
    c.doc = doc;
    if (auto v = root.find("description")) v->as_string();
    if (auto v = root.find("seed")) c.seed = static_cast<std::uint64_t>(v->as_int(0));
    c.data = parse_data(root.at("data"));
    if (!root.at("model").is_object()) root.at("model").fail("expected an object with \"name\"");
    if (c.data.is_text()) {  // the model's context sizes the windows (docs/modules/data.md)
        c.data.context = 64;
        if (auto v = root.at("model").find("context"))
            c.data.context = static_cast<int>(v->as_int(1, 1 << 16));
        if (c.data.stride == 0) c.data.stride = c.data.context;
    }
    c.optimizer = parse_optimizer(root.at("optimizer"));
    if (auto t = root.find("training")) {
        t->expect_object({"epochs", "batch_size", "eval_every", "eval_batch", "target_accuracy",
                          "target_loss", "threads"});
        if (auto v = t->find("epochs")) c.epochs = static_cast<int>(v->as_int(1, 100000));
        if (auto v = t->find("batch_size")) c.batch_size = static_cast<int>(v->as_int(1, 1 << 20));
        if (auto v = t->find("eval_every")) c.eval_every = v->as_int(0);
        if (auto v = t->find("eval_batch")) c.eval_batch = static_cast<int>(v->as_int(1, 1 << 20));
        if (auto v = t->find("threads")) c.threads = static_cast<int>(v->as_int(1, 256));
        if (auto v = t->find("target_accuracy")) {
            c.target_accuracy = v->as_double();
            if (*c.target_accuracy <= 0 || *c.target_accuracy > 1)
                v->fail("a target accuracy is a fraction in (0, 1]", "e.g. 0.885 for 88.5%");
        }
        if (auto v = t->find("target_loss")) c.target_loss = v->as_double();
    }
    c.output_dir = "out/" + std::filesystem::path(doc.file).stem().string();
    if (auto o = root.find("output")) {
        o->expect_object({"dir", "checkpoint_every"});
        if (auto v = o->find("dir")) c.output_dir = v->as_string();
        if (auto v = o->find("checkpoint_every")) c.checkpoint_every = v->as_int(0);
        if (c.output_dir.empty()) o->at("dir").fail("empty output folder", "name a folder");
    }
    if (auto g = root.find("guard")) {
        g->expect_object({"value_bound"});
        if (auto v = g->find("value_bound")) {
            c.value_bound = v->as_double();
            if (!(c.value_bound == 0 || c.value_bound >= 1))
                v->fail(fmt::format("value_bound {:g} would refuse a neighbour's values smaller "
                                    "than this peer's own",
                                    c.value_bound),
                        "use 0 (off) or a factor of at least 1, e.g. 1000");
        }
    }
    if (auto sh = root.find("sharding")) {
        sh->expect_object({"mode", "alpha", "sizes"});
        if (auto m = sh->find("mode")) {
            const auto mode = m->as_enum({"iid", "dirichlet", "contiguous"});
            c.sharding.mode = mode == "iid"         ? ShardMode::iid
                              : mode == "dirichlet" ? ShardMode::dirichlet
                                                    : ShardMode::contiguous;
        }
        if (auto a = sh->find("alpha")) {
            c.sharding.alpha = a->as_double();
            if (c.sharding.alpha <= 0)
                a->fail("alpha must be > 0", "e.g. 0.5 (skewed) or 100 (near iid)");
        }
        if (auto z = sh->find("sizes")) {
            for (const auto& e : z->elements()) {
                const double v = e.as_double();
                if (v <= 0) e.fail("a relative shard size must be > 0");
                c.sharding.sizes.push_back(v);
            }
        }
    }
    c.sharding.seed = c.seed;
    c.outer = find_outer_options(root);
    if (c.outer) {  // eval_every and checkpoint_every count rounds from here on
        c.eval_every = outer_rounds(c.eval_every, *c.outer);
        c.checkpoint_every = outer_rounds(c.checkpoint_every, *c.outer);
        if (root.find("multirate"))
            root.at("outer").fail("multirate partitions cannot be combined with outer rounds yet",
                                  "drop \"multirate\" or \"outer\"");
    }
    if (auto m = root.find("multirate"); m && !m->is_object())
        m->fail("expected an object", "e.g. {\"partitions\": {\"slow\": {\"period\": 4}}}");
    if (auto al = root.find("algorithms")) {
        if (!al->is_object()) al->fail("expected an object: {\"sgp\": {\"staleness\": 2}, ...}");
        for (const auto& item : al->value().items())
            if (!al->at(item.key()).is_object())
                al->at(item.key()).fail("expected an object of options");
    }
    // The schedule is validated now (for the longest run); build_schedule makes the real one.
    (void)build_schedule(c, kLongestRun);
    return c;
}

std::optional<json::Node> TrainingConfig::algorithm_options(const std::string& name) const {
    json::Node root(doc);
    auto al = root.find("algorithms");
    if (!al) return std::nullopt;
    return al->find(name);
}

TrainingConfig load_training_config(const std::string& path) {
    return parse_training_config(json::load_file(path));
}

TrainingData load_training_data(const TrainingConfig& c) {
    const DataConfig& dc = c.data;
    if (dc.is_text()) return load_text_data(c);
    TrainingData d;
    if (dc.name == "fashion-mnist") {
        d.train = load_fashion_mnist(dc.dir, "train");
        d.test = load_fashion_mnist(dc.dir, "test");
        auto limit = [](Dataset& set, std::int64_t n) {
            if (n <= 0 || n >= set.size()) return;
            set.x.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(set.features));
            set.labels.resize(static_cast<std::size_t>(n));
        };
        limit(d.train, dc.train_limit);
        limit(d.test, dc.test_limit);
        return d;
    }
    const bool logreg = dc.name == "logreg_synthetic";
    const std::int64_t total = dc.samples + dc.test_samples;
    SyntheticSet all = logreg ? make_logistic_regression(total, dc.features, dc.seed)
                              : make_least_squares(total, dc.features, dc.seed, dc.noise);
    // The first `samples` rows train, the rest test.
    const auto split = static_cast<std::size_t>(dc.samples) * static_cast<std::size_t>(dc.features);
    d.train = d.test = all.data;
    d.train.name = all.data.name + "/train";
    d.test.name = all.data.name + "/test";
    d.train.x.assign(all.data.x.begin(), all.data.x.begin() + static_cast<std::ptrdiff_t>(split));
    d.test.x.assign(all.data.x.begin() + static_cast<std::ptrdiff_t>(split), all.data.x.end());
    auto cut = [&](auto& v, auto& train, auto& test) {
        if (v.empty()) return;
        train.assign(v.begin(), v.begin() + dc.samples);
        test.assign(v.begin() + dc.samples, v.end());
    };
    cut(all.data.labels, d.train.labels, d.test.labels);
    cut(all.data.targets, d.train.targets, d.test.targets);
    d.optimum_loss = logreg ? logistic_optimum(d.train).loss : least_squares_optimum(d.train).loss;
    return d;
}

std::unique_ptr<Model> build_model(const TrainingConfig& c, const Dataset& train) {
    return models::make_model(Node(c.doc).at("model"), models::shape_of(train));
}

PartitionLayout build_partitions(const TrainingConfig& c, const Model& model) {
    Node root(c.doc);
    if (auto p = root.find("partitions")) return partitions_from_config(*p, model.layers());
    return model.default_partitions();
}

Multirate build_multirate(const TrainingConfig& c, const PartitionLayout& layout) {
    Node root(c.doc);
    if (auto m = root.find("multirate")) return parse_multirate(*m, layout);
    return Multirate(layout);
}

LrSchedule build_schedule(const TrainingConfig& c, std::int64_t total_steps) {
    Node root(c.doc);
    auto s = root.find("schedule");
    if (!s) return LrSchedule(ScheduleConfig{}, c.optimizer.lr);
    if (s->has("total_steps") || !s->has("schedule") || s->at("schedule").as_string() != "cosine")
        return parse_schedule(*s, c.optimizer.lr);
    // A cosine schedule over the whole run: the same file with total_steps filled in, so that
    // errors still name the user's file and path. A warm-up as long as the run is the user's
    // warmup_steps, not the total_steps they never wrote.
    if (auto w = s->find("warmup_steps"); w && w->as_int(0) >= total_steps)
        w->fail(total_steps == kLongestRun
                    ? fmt::format("warmup_steps {} is longer than any run ({} steps at most)",
                                  w->as_int(0), kLongestRun)
                    : fmt::format("warmup_steps {} is not below the run's {} steps (a cosine "
                                  "schedule without total_steps spans the whole run)",
                                  w->as_int(0), total_steps),
                "lower warmup_steps, or give total_steps");
    json::Json patched = *c.doc.root;
    patched["schedule"]["total_steps"] = total_steps;
    json::Document doc{c.doc.file, std::make_shared<const json::Json>(std::move(patched))};
    return parse_schedule(Node(doc).at("schedule"), c.optimizer.lr);
}

int optimizer_state_copies(const OptimizerConfig& o) {
    if (o.kind == OptimizerKind::adam || o.kind == OptimizerKind::adamw) return 2;
    return o.momentum > 0 ? 1 : 0;
}

double training_memory_bytes(const TrainingConfig& c, std::uint64_t parameters) {
    // The outer layer: the inner point, the pseudo-gradient and (with momentum) its buffer.
    // Delayed Nesterov keeps one more: the pseudo-gradients since its last momentum step.
    const double outer = c.outer && !c.outer->identity()
                             ? (c.outer->momentum > 0 ? 3 : 2) +
                                   (c.outer->kind == optim::OuterKind::delayed_nesterov)
                             : 0;
    return static_cast<double>(parameters) * sizeof(float) *
           (4 + optimizer_state_copies(c.optimizer) + outer);
}

void check_training_memory(const TrainingConfig& c, const Model& model) {
    check_memory(training_memory_bytes(c, model.parameter_count()),
                 fmt::format("training {} with {} (parameters, gradient, optimizer state)",
                             model.describe(), to_string(c.optimizer.kind)),
                 c.doc.file, "model", "use a smaller model (fewer or narrower layers)");
}

void check_batch_size(const TrainingConfig& c, std::int64_t samples) {
    if (c.batch_size > samples)
        Node(c.doc)
            .at("training")
            .at("batch_size")
            .fail(fmt::format("batch size {} is larger than the training set of {} samples",
                              c.batch_size, samples),
                  "lower batch_size");
}

}  // namespace gossamer::optim
