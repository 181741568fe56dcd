// gossamer sample --model FILE --config TRAIN --prompt TEXT: the text a saved language model
// generates (docs/operations/cli.md). The work is optim::sample_model_file's; this file parses
// and prints.
#include <fmt/format.h>

#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/blas.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/optimizers/local/text_sample.hpp"

namespace gossamer::cli {

int run_sample(const std::vector<std::string>& args) {
    ArgParser p("gossamer sample", "--model FILE --config TRAIN --prompt TEXT [options]",
                "Generates text with a saved language model (a \"gpt\" on text data): the "
                "config's data gives the vocabulary, the model continues the prompt one "
                "character at a time over a sliding window of its context. Prints the prompt and "
                "its continuation, or --json. Deterministic for a seed.",
                {{"model", "FILE", "the model file (OUT/model.bin, a checkpoint)"},
                 {"config", "TRAIN", "the training config the model was trained with"},
                 {"prompt", "TEXT", "the text to continue (characters of the vocabulary)"},
                 {"chars", "N", "characters to generate (default 200)"},
                 {"temperature", "T", "0: greedy; else softmax(logits / T) (default 0.8)"},
                 {"seed", "S", "seed of the draws (default 1)"},
                 {"threads", "N", "BLAS threads (default: training.threads)"},
                 {"json", "", "print the result as a JSON object"}},
                0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    for (const char* req : {"model", "config", "prompt"})
        if (!a.value(req)) throw UsageError(fmt::format("gossamer sample: --{} is required", req));
    optim::SampleOptions o;
    o.prompt = *a.value("prompt");
    o.chars = a.integer("chars", 200, 0, optim::kMaxSampleChars);
    o.temperature = a.number("temperature", 0.8);
    if (o.temperature < 0)
        throw UsageError(fmt::format(
            "gossamer sample: --temperature {} is negative; give 0 (greedy) or more, e.g. 0.8",
            o.temperature));
    o.seed = static_cast<std::uint64_t>(a.integer("seed", 1, 0, INT64_MAX));
    const auto cfg = optim::load_training_config(*a.value("config"));
    set_blas_threads(static_cast<int>(a.integer("threads", cfg.threads, 1, 256)));
    const auto s = optim::sample_model_file(*a.value("model"), cfg, o);
    if (a.flag("json")) {
        const json::Json j = {{"model_file", s.model_path},
                              {"model", s.file_model},
                              {"step", s.step},
                              {"prompt", o.prompt},
                              {"continuation", s.continuation},
                              {"chars", o.chars},
                              {"temperature", o.temperature},
                              {"seed", o.seed}};
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    std::cout << o.prompt << s.continuation << "\n";
    return 0;
}

}  // namespace gossamer::cli
