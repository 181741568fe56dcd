#pragma once
/// The job of `gossamer train` (docs/modules/train.md): one process trains one model as its
/// training config says, with progress lines, OUT/metrics.jsonl, OUT/model.bin at each finite
/// evaluation and the config's checkpoints. The command line parses the flags into the config
/// and prints the result; a one-peer job without a protocol, so it lives beside the peer job.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gossamer/core/model.hpp"
#include "gossamer/core/output_dir.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/worker.hpp"

namespace gossamer::peer {

/// The first evaluation at which a target was met.
struct TargetHit {
    std::int64_t step = 0;
    double epoch = 0, seconds = 0;
};

/// The training loss became NaN or infinite: the run stopped there (exit status 3), the last good
/// model file kept.
struct TrainDivergence {
    std::int64_t step = 0;         ///< the step whose loss it was
    std::int64_t epoch = 1;        ///< counted from 1
    double lr = 0;                 ///< the learning rate of that step
    bool nan = true;               ///< NaN, else infinite
    std::int64_t saved_step = -1;  ///< the step of OUT/model.bin; -1: none written
};

struct TrainResult {
    std::optional<TrainDivergence> diverged;  ///< set: nothing below but the paths is final
    std::string model;                        ///< the model's description
    std::size_t train_samples = 0, test_samples = 0;
    std::int64_t steps = 0, steps_per_epoch = 0;
    double seconds = 0;     ///< of the training loop
    double train_loss = 0;  ///< the mean over the last evaluation interval
    EvalResult last_eval;   ///< on the test set
    bool text = false;      ///< text data: the loss is in nats per character (text_metrics.hpp)
    std::optional<TargetHit> accuracy_hit, loss_hit;  ///< the config's targets, when reached
    /// The data set's optimal loss where it knows one (synthetic sets), and then the training
    /// loss of the final model.
    std::optional<double> optimum_loss, final_train_loss;
    /// Multirate: what each partition did (docs/algorithms/multirate.md); empty otherwise.
    std::vector<proto::PartitionWork> partitions;
    std::string model_path, metrics_path;
};

/// Loads the data and builds the model, its optimizer and schedule (every check and the big
/// allocations first), makes OUT (the config's output_dir; `origin` says where it came from)
/// ready, trains and evaluates. Throws ConfigError (one line, exit 2) for a config that does
/// not fit, before OUT is touched.
TrainResult run_train_job(const optim::TrainingConfig& config, const OutputOrigin& origin,
                          Progress& progress);

}  // namespace gossamer::peer
