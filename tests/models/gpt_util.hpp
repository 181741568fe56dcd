#pragma once
// Shared helpers for the GPT tests: a tiny model, random windows of token ids, per-tensor names.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gossamer/core/models.hpp"
#include "gossamer/core/rng.hpp"

namespace test_gpt {

/// A spec without a digest.
inline gossamer::models::GptSpec make_spec(int vocab, int context = 64, int layers = 2,
                                           int heads = 4, int width = 128) {
    gossamer::models::GptSpec s;
    s.vocab = vocab, s.context = context, s.layers = layers, s.heads = heads, s.width = width;
    return s;
}

/// vocab 7, context 5, 2 layers, 2 heads, width 8: small enough to check every coordinate.
inline gossamer::models::GptSpec tiny() {
    return make_spec(7, 5, 2, 2, 8);
}

/// `n` random windows of context + 1 token ids (as floats) and their labels (the last id).
struct Windows {
    int n = 0, features = 0;
    std::vector<float> x;
    std::vector<std::int32_t> labels;
    gossamer::Batch batch() const { return {n, features, x.data(), labels.data(), nullptr}; }
    /// The ids of window i.
    std::vector<std::int32_t> ids(int i) const {
        std::vector<std::int32_t> out;
        for (int t = 0; t < features; ++t)
            out.push_back(static_cast<std::int32_t>(x[static_cast<std::size_t>(i) * features + t]));
        return out;
    }
};

inline Windows windows(const gossamer::models::GptSpec& s, int n, std::uint64_t seed) {
    gossamer::Rng rng(seed);
    Windows w{n, s.context + 1, {}, {}};
    for (int i = 0; i < n; ++i) {
        for (int t = 0; t <= s.context; ++t)
            w.x.push_back(static_cast<float>(rng.below(static_cast<std::uint64_t>(s.vocab))));
        w.labels.push_back(static_cast<std::int32_t>(w.x.back()));
    }
    return w;
}

/// A named tensor of the layout in models.hpp: [offset, offset + size).
struct Tensor {
    std::string name;
    std::size_t offset, size;
};

/// Every tensor of the GPT's layout, in order (the layout models.hpp documents, written out
/// independently of the model's code).
inline std::vector<Tensor> tensors(const gossamer::models::GptSpec& s) {
    const std::size_t c = s.width, v = s.vocab, t = s.context;
    std::vector<Tensor> out;
    std::size_t o = 0;
    auto add = [&](std::string name, std::size_t n) {
        out.push_back({std::move(name), o, n});
        o += n;
    };
    add("wte", v * c);
    add("wpe", t * c);
    for (int l = 1; l <= s.layers; ++l) {
        const std::string b = "block" + std::to_string(l) + ".";
        add(b + "ln1.weight", c), add(b + "ln1.bias", c);
        add(b + "attn.qkv.weight", 3 * c * c), add(b + "attn.qkv.bias", 3 * c);
        add(b + "attn.proj.weight", c * c), add(b + "attn.proj.bias", c);
        add(b + "ln2.weight", c), add(b + "ln2.bias", c);
        add(b + "mlp.fc.weight", 4 * c * c), add(b + "mlp.fc.bias", 4 * c);
        add(b + "mlp.proj.weight", c * 4 * c), add(b + "mlp.proj.bias", c);
    }
    add("lnf.weight", c), add("lnf.bias", c), add("out.weight", v * c), add("out.bias", v);
    return out;
}

}  // namespace test_gpt
