// gossamer eval --model FILE --config TRAIN: the test accuracy and loss of a saved model
// (docs/operations/cli.md). The work is optim::evaluate_model_file's; this file parses and prints.
#include <fmt/format.h>

#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/blas.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/text_metrics.hpp"
#include "gossamer/optimizers/local/model_eval.hpp"
#include "gossamer/optimizers/local/training_config.hpp"

namespace gossamer::cli {

int run_eval(const std::vector<std::string>& args) {
    ArgParser p("gossamer eval", "--model FILE --config TRAIN [--json]",
                "Evaluates a saved model on the test set of a training config: OUT/model.bin of "
                "gossamer train or of a job's peers (their exact average), or a checkpoint "
                "(OUT/checkpoint-STEP.bin, OUT/checkpoint-RANK-STEP.bin). The file must fit the "
                "config's model: the same parameter count and partitions. Prints the test loss "
                "and accuracy (the numbers gossamer train reports for the same file; on text data "
                "the loss in nats and bits per character), or --json.",
                {{"model", "FILE", "the model file (docs/formats/model-file.md)"},
                 {"config", "TRAIN", "the training config the model was trained with"},
                 {"threads", "N", "BLAS threads (default: training.threads)"},
                 {"json", "", "print the result as a JSON object"}},
                0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    for (const char* req : {"model", "config"})
        if (!a.value(req))
            throw UsageError(fmt::format("gossamer eval: --{} {} is required", req,
                                         req == std::string("model") ? "FILE" : "TRAIN"));
    const auto cfg = optim::load_training_config(*a.value("config"));
    set_blas_threads(static_cast<int>(a.integer("threads", cfg.threads, 1, 256)));
    const auto e = optim::evaluate_model_file(*a.value("model"), cfg);

    json::Json j = {
        {"model_file", e.model_path},     {"model", e.file_model},        {"step", e.step},
        {"parameters", e.parameters},     {"config", *a.value("config")}, {"data", e.data},
        {"test_samples", e.test_samples}, {"test_loss", e.result.loss}};
    if (e.result.accuracy) j["test_accuracy"] = *e.result.accuracy;
    if (e.text) {
        j["test_nats_per_char"] = e.result.loss;
        j["test_bpc"] = text_metrics::bits_per_char(e.result.loss);
    }
    if (a.flag("json")) {
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    auto row = [](const char* k, const std::string& v) {
        std::cout << fmt::format("  {:<16} {}\n", k, v);
    };
    row("model_file", fmt::format("{} (step {})", e.model_path, e.step));
    row("model", e.file_model);
    row("config", *a.value("config"));
    row("data", fmt::format("{}: {} test samples", e.data, e.test_samples));
    if (e.text) {
        // A language model: the loss is nats per character; bits beside it, no accuracy.
        row("test_loss", fmt::format("{:.6f}", e.result.loss));
        row("nats_per_char", fmt::format("{:.4f}", e.result.loss));
        row("bpc", fmt::format("{:.4f}", text_metrics::bits_per_char(e.result.loss)));
        return 0;
    }
    row("test_loss", fmt::format("{:.6f}", e.result.loss));
    if (e.result.accuracy) row("test_accuracy", fmt::format("{:.2f}%", 100 * *e.result.accuracy));
    return 0;
}

}  // namespace gossamer::cli
