#pragma once
/// The training config (JSON; docs/formats/train-config.md): data, model, optimizer and schedule,
/// training length and evaluation, partitions, output. Read by `gossamer train` now and by the
/// simulator and real peers later. Loading validates everything it can without the data; the
/// parts that need the data's shape (model, partitions, batch size against the data) are checked
/// by build_* below, still before anything is written.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gossamer/core/dataset.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/model.hpp"
#include "gossamer/core/sharding.hpp"
#include "gossamer/optimizers/local/local_optimizer.hpp"
#include "gossamer/optimizers/local/lr_schedule.hpp"
#include "gossamer/optimizers/local/multirate.hpp"
#include "gossamer/optimizers/outer/outer_options.hpp"

namespace gossamer::optim {

struct DataConfig {
    std::string
        name;  ///< fashion-mnist | logreg_synthetic | least_squares_synthetic | bible-kjv | text
    std::string dir;                ///< fashion-mnist folder ("" = default / GOSSAMER_DATA_DIR)
    std::int64_t train_limit = 0;   ///< fashion-mnist: use the first N training samples (0 = all)
    std::int64_t test_limit = 0;    ///< fashion-mnist: the first N test samples (0 = all)
    std::int64_t samples = 0;       ///< synthetic: training samples
    std::int64_t test_samples = 0;  ///< synthetic: test samples
    int features = 0;               ///< synthetic: features
    double noise = 0.1;             ///< least squares: target noise
    std::uint64_t seed = 1;         ///< synthetic: generator seed
    std::string file;               ///< text: the file to read
    std::int64_t chars = 0;         ///< text, bible-kjv: use the first N characters (0 = all)
    int stride = 0;                 ///< text, bible-kjv: window stride (0 = the context)
    int context = 0;                ///< text, bible-kjv: the model's context (windows hold +1)
    bool is_text() const { return name == "bible-kjv" || name == "text"; }
};

struct TrainingConfig {
    json::Document doc;  ///< the parsed file; model and partition nodes are read from it later
    std::uint64_t seed = 1;
    DataConfig data;
    OptimizerConfig optimizer;
    int epochs = 1;
    int batch_size = 64;
    std::int64_t eval_every = 0;  ///< steps between evaluations; 0 = at the end of every epoch
    int eval_batch = 1000;        ///< batch size of evaluation passes
    std::optional<double> target_accuracy;  ///< report the first step at or above it
    std::optional<double> target_loss;      ///< report the first step at or below it
    int threads = 1;                        ///< BLAS threads
    std::string output_dir;                 ///< default: out/<config file stem>
    std::int64_t checkpoint_every = 0;      ///< steps between checkpoints; 0 = none
    /// How the training set is split among peers (sim, peers); `peers` is set by the caller.
    ShardSpec sharding;
    /// "guard": {"value_bound": R}: a received value beyond R times the receiver's own largest
    /// |x| (at least 1) is refused like a non-finite one (docs/operations/reliability.md); 0 = off.
    double value_bound = 0;
    /// "outer": local updates and an outer optimizer (docs/algorithms/outer.md); nullopt: none.
    /// With it, a protocol step is a round of outer->steps inner steps, and eval_every and
    /// checkpoint_every (given in inner steps) are read as rounds, rounded up.
    std::optional<OuterOptions> outer;

    /// The options of algorithm `name` ("algorithms": {"sgp": {...}}), or nullopt.
    std::optional<json::Node> algorithm_options(const std::string& name) const;
};

/// Loads and validates a training config. Throws ConfigError (file, JSON path, fix).
TrainingConfig load_training_config(const std::string& path);
TrainingConfig parse_training_config(const json::Document& doc);

/// The data of a config: training and test sets, and for synthetic sets the known optimum of the
/// training loss (what a converged linear model reaches).
struct TrainingData {
    Dataset train, test;
    std::optional<double> optimum_loss;
};
/// Loads or generates the data. Throws ConfigError naming data.* for a missing or corrupt file.
TrainingData load_training_data(const TrainingConfig& config);

/// Builds the model for the data (ConfigError at "model..." when it does not fit).
std::unique_ptr<Model> build_model(const TrainingConfig& config, const Dataset& train);
/// The partition layout: "partitions" of the config, or one partition per layer.
PartitionLayout build_partitions(const TrainingConfig& config, const Model& model);
/// The multirate rates of `layout` ("multirate" of the config; none: every partition every
/// step). Throws ConfigError as parse_multirate.
Multirate build_multirate(const TrainingConfig& config, const PartitionLayout& layout);
/// The schedule for a run of `total_steps` steps; a cosine schedule without "total_steps" runs
/// over the whole training.
LrSchedule build_schedule(const TrainingConfig& config, std::int64_t total_steps);
/// Parameter-sized copies an optimizer keeps: 0 (plain SGD), 1 (momentum), 2 (Adam's moments).
int optimizer_state_copies(const OptimizerConfig& optimizer);
/// About the bytes one process training a model of `parameters` floats keeps: the parameters,
/// the gradient, the model file's write buffer, the model's scratch (about one more copy,
/// measured with an MLP) and the optimizer's state. A lower bound: activations come on top.
double training_memory_bytes(const TrainingConfig& config, std::uint64_t parameters);
/// Throws ConfigError at the config's "model" when training_memory_bytes() exceeds what the
/// machine leaves (core/memory.hpp), naming both sizes.
void check_training_memory(const TrainingConfig& config, const Model& model);
/// Checks the batch size against a shard of `samples` samples (ConfigError at
/// training.batch_size).
void check_batch_size(const TrainingConfig& config, std::int64_t samples);

}  // namespace gossamer::optim
