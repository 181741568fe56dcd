#include "gossamer/optimizers/model_eval.hpp"

#include <fmt/format.h>

#include "gossamer/core/error.hpp"
#include "gossamer/core/memory.hpp"

namespace gossamer::optim {
namespace {

std::string layout_text(const PartitionLayout& layout) {
    std::string out;
    for (const auto& p : layout.partitions())
        out += fmt::format("{}{} [{}, {})", out.empty() ? "" : ", ", p.name, p.offset,
                           p.offset + p.size);
    return out;
}

}  // namespace

void check_model_fits(const std::string& path, const ModelFile& file, const TrainingConfig& config,
                      const Model& model) {
    const std::string fix = fmt::format(
        "give the training config the model was trained with ({} is {})", path, file.model);
    if (file.params.size() != model.parameter_count())
        throw ConfigError(path, "",
                          fmt::format("the model file holds {} parameters, but the model of {} "
                                      "({}) has {}",
                                      file.params.size(), config.doc.file, model.describe(),
                                      model.parameter_count()),
                          fix);
    const PartitionLayout expected = build_partitions(config, model);
    const auto& a = file.layout.partitions();
    const auto& b = expected.partitions();
    bool same = a.size() == b.size();
    for (std::size_t i = 0; same && i < a.size(); ++i)
        same = a[i].name == b[i].name && a[i].offset == b[i].offset && a[i].size == b[i].size;
    if (!same)
        throw ConfigError(
            path, "",
            fmt::format("the model file's partitions ({}) differ from those of "
                        "the model of {} ({})",
                        layout_text(file.layout), config.doc.file, layout_text(expected)),
            fix);
}

ModelEvaluation evaluate_model_file(const std::string& path, const TrainingConfig& config) {
    ModelFile file;
    {
        AllocationScope scope(fmt::format("the contents of model file {}", path));
        file = load_model_file(path);  // first: a bad file is refused before the data loads
    }
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
    return e;
}

}  // namespace gossamer::optim
