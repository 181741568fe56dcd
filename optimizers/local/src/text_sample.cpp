#include "gossamer/optimizers/local/text_sample.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/finite.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/core/text_metrics.hpp"
#include "gossamer/optimizers/local/model_eval.hpp"

namespace gossamer::optim {
namespace {

std::string show_char(unsigned char c) {
    if (c == '\'') return "\"'\"";
    if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
    return fmt::format("\\x{:02x}", c);
}

// The index drawn from softmax(logits / temperature); argmax (the first) at temperature 0.
std::int32_t pick(std::span<const float> logits, double temperature, Rng& rng) {
    const auto top = std::max_element(logits.begin(), logits.end());
    if (temperature == 0) return static_cast<std::int32_t>(top - logits.begin());
    std::vector<double> p(logits.size());
    double sum = 0;
    for (std::size_t i = 0; i < logits.size(); ++i)
        sum += p[i] = std::exp((static_cast<double>(logits[i]) - *top) / temperature);
    double u = rng.uniform() * sum;
    for (std::size_t i = 0; i < p.size(); ++i) {
        if (u < p[i]) return static_cast<std::int32_t>(i);
        u -= p[i];
    }
    return static_cast<std::int32_t>(top - logits.begin());  // rounding left u past the end
}

}  // namespace

std::vector<std::int32_t> encode_prompt(std::string_view prompt, std::string_view vocabulary,
                                        const std::string& field) {
    if (prompt.empty())
        throw ConfigError("", field, "the prompt is empty",
                          "give at least one character for the model to continue");
    std::array<int, 256> id;
    id.fill(-1);
    for (std::size_t i = 0; i < vocabulary.size(); ++i)
        id[static_cast<unsigned char>(vocabulary[i])] = static_cast<int>(i);
    std::vector<std::int32_t> ids;
    ids.reserve(prompt.size());
    for (std::size_t i = 0; i < prompt.size(); ++i) {
        const auto c = static_cast<unsigned char>(prompt[i]);
        if (id[c] < 0)
            throw ConfigError("", field,
                              fmt::format("character {} at position {} is not in the model's "
                                          "vocabulary of {} characters",
                                          show_char(c), i, vocabulary.size()),
                              "use only characters of the training text");
        ids.push_back(id[c]);
    }
    return ids;
}

std::string generate_text(models::LanguageModel& model, std::span<const float> params,
                          std::string_view vocabulary, const SampleOptions& o) {
    if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
        throw ConfigError("", "--temperature",
                          fmt::format("{} is not a temperature", o.temperature),
                          "give 0 (greedy) or a positive number, e.g. 0.8");
    if (o.chars < 0 || o.chars > kMaxSampleChars)
        throw ConfigError("", "--chars", fmt::format("{} characters is out of range", o.chars),
                          fmt::format("give 0..{}", kMaxSampleChars));
    if (static_cast<std::size_t>(model.vocabulary_size()) != vocabulary.size())
        throw Error(fmt::format("the model has {} characters, the vocabulary {}",
                                model.vocabulary_size(), vocabulary.size()));
    auto tokens = encode_prompt(o.prompt, vocabulary, o.prompt_field);
    const auto context = static_cast<std::size_t>(model.context());
    std::vector<float> logits(vocabulary.size());
    Rng rng(o.seed);
    std::string out;
    out.reserve(static_cast<std::size_t>(o.chars));
    for (std::int64_t n = 0; n < o.chars; ++n) {
        const std::size_t first = tokens.size() > context ? tokens.size() - context : 0;
        model.next_logits(params, std::span(tokens).subspan(first), logits);
        const std::int32_t next = pick(logits, o.temperature, rng);
        tokens.push_back(next);
        out += vocabulary[static_cast<std::size_t>(next)];
    }
    return out;
}

TextSample sample_model_file(const std::string& path, const TrainingConfig& config,
                             const SampleOptions& options) {
    ModelFile file;
    {
        AllocationScope scope(fmt::format("the contents of model file {}", path));
        file = load_model_file(path);
    }
    if (const auto k = first_non_finite(file.params.span()))
        throw ConfigError(
            path, "parameters",
            fmt::format("parameter {} of {} is {}: the training that wrote this "
                        "model diverged",
                        *k, file.params.size(), non_finite_name(file.params.span()[*k])),
            "sample an earlier checkpoint, or train again with a lower learning "
            "rate or a warm-up");
    const TrainingData data = load_training_data(config);
    auto model = build_model(config, data.train);
    auto* lm = dynamic_cast<models::LanguageModel*>(model.get());
    if (!lm || !text_metrics::is_text(data.train))
        throw ConfigError(config.doc.file, "model",
                          fmt::format("gossamer sample needs a language model on text data; "
                                      "this config's model is {} on {}",
                                      model->describe(), config.data.name),
                          "give the config of a \"gpt\" model on text data (\"bible-kjv\", "
                          "\"text\")");
    check_model_fits(path, file, config, *model);
    TextSample s;
    s.model_path = path;
    s.file_model = file.model;
    s.step = file.step;
    s.continuation = generate_text(*lm, file.params.span(), data.train.vocabulary, options);
    return s;
}

}  // namespace gossamer::optim
