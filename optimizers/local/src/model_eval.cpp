#include "gossamer/optimizers/local/model_eval.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "gossamer/core/error.hpp"
#include "gossamer/core/finite.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/core/text_metrics.hpp"

namespace gossamer::optim {

std::string description_digest(const std::string& description) {
    for (auto at = description.find('#'); at != std::string::npos;
         at = description.find('#', at + 1)) {
        if (description.size() - at < 9) break;
        const auto hex = description.substr(at + 1, 8);
        const bool all_hex = std::all_of(hex.begin(), hex.end(),
                                         [](unsigned char c) { return std::isxdigit(c) != 0; });
        const bool ends = description.size() == at + 9 || description[at + 9] == ' ';
        if (all_hex && ends) return hex;
    }
    return "";
}

void check_model_fits(const std::string& path, const ModelFile& file, const TrainingConfig& config,
                      const Model& model) {
    const std::string fix = fmt::format(
        "give the training config the model was trained with ({} is {})", path, file.model);
    // The vocabulary first: a different one may have the same size, and a different size would
    // otherwise read as a parameter count that differs for no reason the user can see.
    const std::string file_digest = description_digest(file.model),
                      model_digest = description_digest(model.describe());
    if (!file_digest.empty() && !model_digest.empty() && file_digest != model_digest)
        throw ConfigError(
            path, "",
            fmt::format("the model file was trained on another vocabulary (#{}) "
                        "than the data of {} gives (#{}): the file is {}, the "
                        "config's model {}",
                        file_digest, config.doc.file, model_digest, file.model, model.describe()),
            "give the training config (and data) the model was trained with");
    if (file.params.size() != model.parameter_count())
        throw ConfigError(path, "",
                          fmt::format("the model file holds {} parameters, but the model of {} "
                                      "({}) has {}",
                                      file.params.size(), config.doc.file, model.describe(),
                                      model.parameter_count()),
                          fix);
    const PartitionLayout expected = build_partitions(config, model);
    if (file.layout != expected)
        throw ConfigError(path, "",
                          fmt::format("the model file's partitions ({}) differ from those of "
                                      "the model of {} ({})",
                                      file.layout.describe(), config.doc.file, expected.describe()),
                          fix);
}

ModelEvaluation evaluate_model_file(const std::string& path, const TrainingConfig& config) {
    ModelFile file;
    {
        AllocationScope scope(fmt::format("the contents of model file {}", path));
        file = load_model_file(path);  // first: a bad file is refused before the data loads
    }
    // A model with NaN or infinite parameters is no model: its "accuracy" (argmax over NaN
    // logits) would be a number that means nothing (docs/operations/reliability.md).
    if (const auto k = first_non_finite(file.params.span()))
        throw ConfigError(
            path, "parameters",
            fmt::format("parameter {} of {} is {}: the training that wrote this "
                        "model diverged",
                        *k, file.params.size(), non_finite_name(file.params.span()[*k])),
            "evaluate an earlier checkpoint, or train again with a lower learning "
            "rate or a warm-up");
    const TrainingData data = load_training_data(config);
    auto model = build_model(config, data.train);
    check_model_fits(path, file, config, *model);
    ModelEvaluation e;
    e.model_path = path;
    e.file_model = file.model;
    e.config_model = model->describe();
    e.step = file.step;
    e.parameters = file.params.size();
    e.data = config.data.name;
    e.test_samples = data.test.size();
    e.result = model->evaluate(file.params.span(), data.test, config.eval_batch);
    e.text = text_metrics::is_text(data.test);
    return e;
}

}  // namespace gossamer::optim
