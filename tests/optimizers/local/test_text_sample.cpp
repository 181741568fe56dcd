// Text generation for `gossamer sample` (optim::generate_text): greedy and temperature draws,
// the sliding window of the model's context, determinism for a seed, and one ConfigError for
// each bad input. A bigram model stands in for the GPT: its logits after a token are a row of
// its parameters.
#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/model_eval.hpp"
#include "gossamer/optimizers/local/text_sample.hpp"

using namespace gossamer;

namespace {

class Bigram : public models::LanguageModel {
  public:
    Bigram(int vocab, int context) : vocab_(vocab), context_(context) {
        layers_.push_back({"table", 0, static_cast<std::size_t>(vocab * vocab)});
    }
    std::string name() const override { return "bigram"; }
    std::string describe() const override { return "bigram vocab " + std::to_string(vocab_); }
    std::size_t parameter_count() const override { return layers_[0].size; }
    std::span<const Layer> layers() const override { return layers_; }
    int input_features() const override { return context_ + 1; }
    int classes() const override { return vocab_; }
    void init(std::span<float> p, std::uint64_t) const override {
        std::fill(p.begin(), p.end(), 0.0f);
    }
    double loss_and_gradient(std::span<const float>, const Batch&, std::span<float>,
                             const LayerMask&) override {
        throw std::logic_error("not used");
    }
    BatchStats forward(std::span<const float>, const Batch&) override {
        throw std::logic_error("not used");
    }
    std::unique_ptr<Model> clone() const override { return std::make_unique<Bigram>(*this); }
    int context() const override { return context_; }
    int vocabulary_size() const override { return vocab_; }
    void next_logits(std::span<const float> params, std::span<const std::int32_t> tokens,
                     std::span<float> logits) override {
        if (tokens.empty() || tokens.size() > static_cast<std::size_t>(context_))
            throw Error("window out of range");
        longest = std::max(longest, tokens.size());
        const auto row = static_cast<std::size_t>(tokens.back() * vocab_);
        std::copy_n(params.begin() + static_cast<std::ptrdiff_t>(row), vocab_, logits.begin());
    }
    std::size_t longest = 0;  ///< the longest window it was given

  private:
    int vocab_, context_;
    std::vector<Layer> layers_;
};

// A table over "abc": after a comes b, after b comes c, after c comes a (by a wide margin).
std::vector<float> cycle_table() {
    std::vector<float> t(9, 0.0f);
    t[0 * 3 + 1] = 10;
    t[1 * 3 + 2] = 10;
    t[2 * 3 + 0] = 10;
    return t;
}

std::string error_of(Bigram& m, const std::vector<float>& p, const optim::SampleOptions& o) {
    try {
        optim::generate_text(m, p, "abc", o);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("sample: greedy follows the argmax, over a sliding window of the context") {
    Bigram m(3, 4);
    const auto p = cycle_table();
    optim::SampleOptions o;
    o.prompt = std::string("ab");
    o.chars = 10;
    o.temperature = 0;
    CHECK(optim::generate_text(m, p, "abc", o) == "cabcabcabc");
    CHECK(m.longest == 4);  // never more than the context, though 12 tokens were seen
    o.chars = 0;
    CHECK(optim::generate_text(m, p, "abc", o).empty());
}

TEST_CASE("sample: temperature draws are deterministic for a seed and follow the softmax") {
    Bigram m(3, 8);
    const std::vector<float> flat(9, 0.0f);  // uniform: every character as likely
    optim::SampleOptions o;
    o.prompt = std::string("a");
    o.chars = 3000;
    o.temperature = 1;
    o.seed = 7;
    const auto one = optim::generate_text(m, flat, "abc", o);
    CHECK(one == optim::generate_text(m, flat, "abc", o));
    o.seed = 8;
    CHECK(one != optim::generate_text(m, flat, "abc", o));
    for (char c : std::string("abc")) {
        const auto k = std::count(one.begin(), one.end(), c);
        CHECK(k > 850);  // 1000 expected; 850 is over 5 standard deviations below
        CHECK(k < 1150);
    }
    // A low temperature makes the cycle's 10-nat margin absolute; a high one flattens it.
    const auto p = cycle_table();
    o.prompt = std::string("c");
    o.chars = 300;
    o.temperature = 0.5;
    std::string cycle;
    for (int i = 0; i < 100; ++i) cycle += "abc";
    CHECK(optim::generate_text(m, p, "abc", o) == cycle);
    o.temperature = 1000;
    const auto hot = optim::generate_text(m, p, "abc", o);
    CHECK(std::count(hot.begin(), hot.end(), 'b') < 200);
}

TEST_CASE("sample: bad input is one ConfigError that says what and where") {
    Bigram m(3, 4);
    const auto p = cycle_table();
    optim::SampleOptions o;
    o.prompt = std::string("abxa");
    CHECK(error_of(m, p, o).find("--prompt: character 'x' at position 2 is not in the model's "
                                 "vocabulary of 3 characters") != std::string::npos);
    o.prompt = std::string("ab\x01", 3);
    CHECK(error_of(m, p, o).find("\\x01 at position 2") != std::string::npos);
    o.prompt = std::string("");
    CHECK(error_of(m, p, o).find("the prompt is empty") != std::string::npos);
    o.prompt = std::string("a");
    o.temperature = -0.1;
    CHECK(error_of(m, p, o).find("--temperature") != std::string::npos);
    o.temperature = 1;
    o.chars = -1;
    CHECK(error_of(m, p, o).find("--chars") != std::string::npos);
    o.chars = optim::kMaxSampleChars + 1;
    CHECK(error_of(m, p, o).find("--chars") != std::string::npos);
}

TEST_CASE("model descriptions: the vocabulary digest is the 8 hex digits after '#'") {
    CHECK(optim::description_digest("gpt L2 H4 W128 T64 vocab 62 #1a2b3c4d (1 parameters)") ==
          "1a2b3c4d");
    CHECK(optim::description_digest("gpt vocab 62 #1a2b3c4d") == "1a2b3c4d");
    CHECK(optim::description_digest("mlp 784-256-10 (235146 parameters)").empty());
    CHECK(optim::description_digest("x #1a2b3c4 y").empty());    // 7 digits
    CHECK(optim::description_digest("x #1a2b3c4d5 y").empty());  // 9 digits
    CHECK(optim::description_digest("x #zz2b3c4d #00ff00ff").empty() == false);
}
