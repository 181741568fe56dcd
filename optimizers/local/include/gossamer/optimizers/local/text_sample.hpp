#pragma once
/// Text a language model generates from a prompt (`gossamer sample`, docs/operations/cli.md).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gossamer/core/models.hpp"
#include "gossamer/optimizers/local/training_config.hpp"

namespace gossamer::optim {

/// How to generate.
struct SampleOptions {
    std::string prompt;                     ///< at least one character of the vocabulary
    std::int64_t chars = 200;               ///< characters to generate, in [0, kMaxSampleChars]
    double temperature = 0.8;               ///< 0: greedy (argmax); > 0: softmax(logits / T)
    std::uint64_t seed = 1;                 ///< the same seed gives the same text
    std::string prompt_field = "--prompt";  ///< names the prompt in errors
};

/// The most characters one call generates (each costs a forward pass over the context).
inline constexpr std::int64_t kMaxSampleChars = 1'000'000;

/// Token ids of `prompt` in `vocabulary` (token id i is vocabulary[i]). Throws ConfigError
/// (path `field`) for an empty prompt, or naming the first character outside the vocabulary
/// (printable, or as \xNN) and its position (counted from 0).
std::vector<std::int32_t> encode_prompt(std::string_view prompt, std::string_view vocabulary,
                                        const std::string& field);

/// The `options.chars` characters the model generates after the prompt: each next token from
/// next_logits over the last context() tokens (a sliding window), greedy at temperature 0, else
/// drawn from softmax(logits / temperature) with an Rng seeded by options.seed. Throws
/// ConfigError for a prompt outside the vocabulary (encode_prompt), a negative temperature or
/// chars out of range; Error when the model's vocabulary size differs from `vocabulary`'s.
std::string generate_text(models::LanguageModel& model, std::span<const float> params,
                          std::string_view vocabulary, const SampleOptions& options);

/// What `gossamer sample` prints.
struct TextSample {
    std::string model_path, file_model;  ///< the file and the description it stores
    std::int64_t step = 0;               ///< training steps the file says were taken
    std::string continuation;            ///< the generated characters (after the prompt)
};

/// Loads the model file (load_model_file), the config's data (its vocabulary) and model, checks
/// the model is a language model on text data and that the file fits it (check_model_fits:
/// sizes, partitions, the vocabulary digest), then generate_text. Throws ConfigError (one line,
/// exit 2) for each of those failures.
TextSample sample_model_file(const std::string& path, const TrainingConfig& config,
                             const SampleOptions& options);

}  // namespace gossamer::optim
