// make_model: config node + data shape -> model, with every mistake reported as a ConfigError at
// its JSON path before anything is allocated.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "gossamer/core/json.hpp"
#include "gossamer/core/models.hpp"
#include "gossamer/core/text.hpp"

namespace gossamer::models {
namespace {

const std::vector<std::string> kBuiltins = {"softmax", "linear", "mlp", "cnn", "gpt"};

struct Registry {
    std::mutex mutex;
    std::vector<std::pair<std::string, ModelFactory>> entries;
};

Registry& registry() {
    static Registry r;
    return r;
}

std::string label(const DataShape& d) {
    return d.name.empty() ? std::string("the data set") : "data set '" + d.name + "'";
}

// A positive size from the config; the message says which kind of size.
int positive(const json::Node& n, const char* what) {
    if (!n.value().is_number_integer()) n.fail(fmt::format("expected an integer {}", what));
    const auto v = n.as_int();
    if (v < 1) n.fail(fmt::format("{} {} must be positive", what, v), "use a value >= 1");
    if (v > (1 << 24)) n.fail(fmt::format("{} {} is implausibly large", what, v));
    return static_cast<int>(v);
}

void check_classifier(const json::Node& name, const DataShape& d) {
    if (d.classes >= 2) return;
    name.fail(fmt::format("\"{}\" is a classifier, but {} has {}", name.as_string(), label(d),
                          d.classes == 0 ? std::string("regression targets")
                                         : fmt::format("{} class", d.classes)),
              "use \"linear\" for regression, or a data set with labels");
}

// "input": the features per sample (all models) or [channels, height, width] (cnn).
void check_input(const json::Node& node, const DataShape& d, bool image) {
    auto in = node.find("input");
    if (!in) return;
    if (image && in->is_array()) {
        in->expect_array(3);
        if (in->size() != 3) in->fail("expected [channels, height, width]");
        const int c = positive((*in)[0], "channels"), h = positive((*in)[1], "height"),
                  w = positive((*in)[2], "width");
        if (c != d.channels || h != d.height || w != d.width)
            in->fail(fmt::format("input {}x{}x{} does not match {}, whose images are {}x{}x{}", c,
                                 h, w, label(d), d.channels, d.height, d.width),
                     fmt::format("set \"input\": [{}, {}, {}] or remove it", d.channels, d.height,
                                 d.width));
        return;
    }
    const int f = positive(*in, "input size");
    if (f != d.features)
        in->fail(fmt::format("input {} does not match {}, which has {} features per sample", f,
                             label(d), d.features),
                 fmt::format("set \"input\": {} or remove it", d.features));
}

std::vector<int> sizes(const json::Node& n, const char* what, std::size_t min_count) {
    n.expect_array(min_count);
    std::vector<int> out;
    for (const auto& e : n.elements()) out.push_back(positive(e, what));
    return out;
}

std::unique_ptr<Model> build_cnn(const json::Node& node, const DataShape& d) {
    check_classifier(node.at("name"), d);
    if (d.height < 1 || d.width < 1 || d.channels < 1 ||
        d.channels * d.height * d.width != d.features)
        node.at("name").fail(fmt::format("\"cnn\" needs images, but {} has flat samples of {} "
                                         "features",
                                         label(d), d.features),
                             "use \"mlp\", or a data set with an image shape such as 1x28x28");
    check_input(node, d, true);
    CnnSpec spec;
    spec.channels = d.channels;
    spec.height = d.height;
    spec.width = d.width;
    spec.classes = d.classes;
    if (auto k = node.find("kernel")) {
        spec.kernel = positive(*k, "kernel size");
        if (spec.kernel % 2 == 0)
            k->fail(fmt::format("kernel size {} is even; 'same' padding needs an odd kernel",
                                spec.kernel),
                    fmt::format("use {} or {}", spec.kernel - 1, spec.kernel + 1));
    }
    if (auto c = node.find("channels")) {
        spec.filters = sizes(*c, "channel count", 1);
        int h = d.height, w = d.width;
        for (std::size_t s = 0; s < spec.filters.size(); ++s, h /= 2, w /= 2)
            if (h < 2 || w < 2)
                c->fail(fmt::format("{} stages of 2x2 pooling shrink the {}x{} images of {} "
                                    "below 1x1",
                                    spec.filters.size(), d.height, d.width, label(d)),
                        fmt::format("use at most {} stages", s));
    }
    return cnn(spec);
}

// A size from the config, at most `hi` (a bound on memory and time, not on the architecture).
int bounded(const json::Node& n, const char* what, int hi) {
    const int v = positive(n, what);
    if (v > hi)
        n.fail(fmt::format("{} {} is out of range", what, v), fmt::format("use 1 to {}", hi));
    return v;
}

// The divisor of `width` nearest to `heads` (ties: the larger), for the error message.
int nearest_divisor(int width, int heads) {
    int best = 1;
    for (int d = 1; d <= width; ++d)
        if (width % d == 0 && std::abs(d - heads) <= std::abs(best - heads)) best = d;
    return best;
}

std::unique_ptr<Model> build_gpt(const json::Node& node, const DataShape& d) {
    node.expect_object({"name", "input", "layers", "heads", "width", "context"});
    const json::Node name = node.at("name");
    if (d.vocabulary.empty())
        name.fail(
            fmt::format("\"gpt\" needs text data with a vocabulary, but {} has none", label(d)),
            R"(use "data": {"name": "bible-kjv"} or {"name": "text", "file": "PATH"})");
    const int vocab = static_cast<int>(d.vocabulary.size());
    if (vocab < 2)
        name.fail(fmt::format("{} has a vocabulary of {} character; a language model needs at "
                              "least 2",
                              label(d), vocab),
                  "use a longer text");
    if (d.classes != vocab)
        name.fail(fmt::format("{} has {} classes but a vocabulary of {} characters", label(d),
                              d.classes, vocab),
                  "load the text through the \"bible-kjv\" or \"text\" data");
    GptSpec spec;
    spec.vocab = vocab;
    if (auto n = node.find("layers")) spec.layers = bounded(*n, "layer count", 256);
    if (auto n = node.find("width")) spec.width = bounded(*n, "width", 8192);
    if (auto n = node.find("context")) spec.context = bounded(*n, "context", 8192);
    if (auto n = node.find("heads")) {
        spec.heads = bounded(*n, "head count", 8192);
        if (spec.width % spec.heads != 0)
            n->fail(
                fmt::format("{} heads do not divide width {}", spec.heads, spec.width),
                fmt::format("use a divisor such as {}", nearest_divisor(spec.width, spec.heads)));
    } else if (spec.width % spec.heads != 0) {
        node.at("width").fail(
            fmt::format("width {} is not a multiple of the default 4 heads", spec.width),
            "set \"heads\" to a divisor of the width");
    }
    if (d.features != spec.context + 1) {
        const auto ctx = node.find("context");
        (ctx ? *ctx : name)
            .fail(fmt::format("context {} needs windows of {} characters, but {} has {} per "
                              "sample (windows built for context {})",
                              spec.context, spec.context + 1, label(d), d.features, d.features - 1),
                  fmt::format("set \"context\": {} or build the windows with context {}",
                              d.features - 1, spec.context));
    }
    check_input(node, d, false);
    spec.digest = vocabulary_digest(d.vocabulary);
    return gpt(spec);
}

std::unique_ptr<Model> build_builtin(const std::string& name, const json::Node& node,
                                     const DataShape& d) {
    if (name == "softmax") {
        node.expect_object({"name", "input"});
        check_classifier(node.at("name"), d);
        check_input(node, d, false);
        return softmax_regression(d.features, d.classes);
    }
    if (name == "linear") {
        node.expect_object({"name", "input"});
        if (d.classes != 0)
            node.at("name").fail(fmt::format("\"linear\" fits regression targets, but {} has {} "
                                             "classes",
                                             label(d), d.classes),
                                 "use \"softmax\" for classification");
        check_input(node, d, false);
        return linear_regression(d.features);
    }
    if (name == "mlp") {
        node.expect_object({"name", "input", "hidden"});
        check_classifier(node.at("name"), d);
        check_input(node, d, false);
        std::vector<int> hidden = {256, 128};
        if (auto h = node.find("hidden")) hidden = sizes(*h, "hidden layer size", 0);
        return mlp(d.features, hidden, d.classes);
    }
    if (name == "gpt") return build_gpt(node, d);
    node.expect_object({"name", "input", "channels", "kernel"});
    return build_cnn(node, d);
}

}  // namespace

DataShape shape_of(const Dataset& data) {
    return {data.name,   data.features, data.classes,   data.channels,
            data.height, data.width,    data.vocabulary};
}

std::unique_ptr<Model> make_model(const json::Node& node, const DataShape& data) {
    if (!node.is_object())
        node.fail("expected a model object", R"(write e.g. {"name": "mlp", "hidden": [256, 128]})");
    const json::Node name_node = node.at("name");
    const std::string name = name_node.as_string();
    if (data.features < 1)
        node.fail(fmt::format("{} has no features per sample", label(data)),
                  "load a data set before building the model");
    try {
        if (std::find(kBuiltins.begin(), kBuiltins.end(), name) != kBuiltins.end())
            return build_builtin(name, node, data);
        ModelFactory factory;
        {
            std::lock_guard lock(registry().mutex);
            for (const auto& [n, f] : registry().entries)
                if (n == name) factory = f;
        }
        if (factory) return factory(node, data);
    } catch (const ConfigError&) {
        throw;
    } catch (const Error& e) {
        node.fail(e.what());  // a size the checks above did not foresee
    }
    const auto names = model_names();
    const auto near = json::closest(name, names);
    name_node.fail(fmt::format("unknown model \"{}\"", name),
                   (near ? fmt::format("did you mean \"{}\"? ", *near) : std::string()) +
                       fmt::format("models: {}", fmt::join(names, ", ")));
}

void register_model(const std::string& name, ModelFactory factory) {
    if (name.empty() || !factory) throw Error("register_model: empty name or factory");
    std::lock_guard lock(registry().mutex);
    bool taken = std::find(kBuiltins.begin(), kBuiltins.end(), name) != kBuiltins.end();
    for (const auto& e : registry().entries) taken = taken || e.first == name;
    if (taken) throw Error(fmt::format("register_model: the model name \"{}\" is taken", name));
    registry().entries.emplace_back(name, std::move(factory));
}

std::vector<std::string> model_names() {
    std::vector<std::string> out = kBuiltins;
    std::lock_guard lock(registry().mutex);
    for (const auto& e : registry().entries) out.push_back(e.first);
    return out;
}

}  // namespace gossamer::models
