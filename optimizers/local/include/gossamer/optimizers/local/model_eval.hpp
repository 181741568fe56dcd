#pragma once
/// Evaluating a saved model (`gossamer eval`, docs/operations/cli.md): a model file (OUT/model.bin
/// of train or of the peers' average, or a checkpoint: one format, docs/formats/model-file.md)
/// against the model and test set of a training config.

#include <cstdint>
#include <string>

#include "gossamer/core/model.hpp"
#include "gossamer/core/model_file.hpp"
#include "gossamer/optimizers/local/training_config.hpp"

namespace gossamer::optim {

/// What `gossamer eval` reports.
struct ModelEvaluation {
    std::string model_path;
    std::string file_model;    ///< the model description stored in the file
    std::string config_model;  ///< the config's model, described
    std::int64_t step = 0;     ///< training steps the file says were taken
    std::uint64_t parameters = 0;
    std::string data;  ///< the data set's name
    std::int64_t test_samples = 0;
    EvalResult result;  ///< mean loss and accuracy on the config's test set
    bool text = false;  ///< text data: the loss is in nats per character (text_metrics.hpp)
};

/// The vocabulary digest in a model description ("gpt L2 ... vocab 62 #1a2b3c4d (...)": the 8
/// hex digits after '#'), or "" when it names none.
std::string description_digest(const std::string& description);

/// Checks that `file` fits the config's model: the same parameter count and the same partition
/// layout (names, offsets, sizes) as training with `config` writes, and, where both descriptions
/// name a vocabulary digest (a language model), the same vocabulary. Throws ConfigError naming
/// `file.path` and both sizes (or layouts, or vocabularies) otherwise.
void check_model_fits(const std::string& path, const ModelFile& file, const TrainingConfig& config,
                      const Model& model);

/// Loads the model file at `path` (load_model_file: ConfigError for a missing file, a folder,
/// a truncated or corrupt file), then the config's data, builds its model, checks the file fits
/// it (check_model_fits) and evaluates it on the test set in batches of training.eval_batch:
/// the same computation `gossamer train` reports at its evaluations.
ModelEvaluation evaluate_model_file(const std::string& path, const TrainingConfig& config);

}  // namespace gossamer::optim
