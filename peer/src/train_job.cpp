// gossamer train's job: one process, one model (docs/modules/train.md).
#include "gossamer/peer/train_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "gossamer/core/blas.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/core/metrics.hpp"
#include "gossamer/core/model_file.hpp"
#include "gossamer/core/text_metrics.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"

namespace gossamer::peer {

TrainResult run_train_job(const optim::TrainingConfig& cfg, const OutputOrigin& origin,
                          Progress& progress) {
    TrainResult res;
    set_blas_threads(cfg.threads);
    progress(fmt::format("loading {}", cfg.data.name));
    auto data = optim::load_training_data(cfg);
    optim::check_batch_size(cfg, data.train.size());
    if (cfg.outer)
        throw ConfigError(cfg.doc.file, "outer",
                          "gossamer train runs one process, and the outer layer's rounds are "
                          "between peers",
                          "drop \"outer\", or run the config with gossamer sim, peer or launch");
    auto model = optim::build_model(cfg, data.train);
    optim::check_training_memory(cfg, *model);
    auto layout = optim::build_partitions(cfg, *model);
    auto rates = optim::build_multirate(cfg, layout);
    const std::int64_t per_epoch = data.train.size() / cfg.batch_size;
    const std::int64_t total = per_epoch * cfg.epochs;
    auto schedule = optim::build_schedule(cfg, total);
    const std::string description = model->describe();
    // The output folder is made ready after every other check and the big allocations, so a
    // refused run writes nothing (docs/operations/cli.md, "Output folders").
    const std::filesystem::path out(cfg.output_dir);
    auto trainer = [&] {
        AllocationScope scope(
            fmt::format("the parameters, gradient and optimizer state of {}", description));
        return optim::LocalTrainer(std::move(model), layout, cfg.optimizer, schedule, data.train,
                                   cfg.batch_size, cfg.seed);
    }();
    trainer.set_multirate(std::move(rates));
    if (auto notice = prepare_output_dir(out, "gossamer train", origin, OutputUse::replace,
                                         {"model.bin", "model.bin.tmp", "metrics.jsonl"}))
        std::cerr << "note: " << *notice << "\n";
    res.model_path = (out / "model.bin").string();
    MetricsWriter metrics((out / "metrics.jsonl").string());
    res.metrics_path = metrics.path();
    const std::int64_t eval_every = cfg.eval_every > 0 ? cfg.eval_every : per_epoch;
    res.text = text_metrics::is_text(data.test);

    double loss_sum = 0;
    std::int64_t loss_count = 0, saved_step = -1;
    const double start = progress.elapsed();
    for (std::int64_t step = 0; step < total; ++step) {
        const double lr = trainer.lr();
        const double loss = trainer.step();
        if (!std::isfinite(loss)) {
            progress.done();
            res.diverged =
                TrainDivergence{step, step / per_epoch + 1, lr, std::isnan(loss), saved_step};
            metrics.write({{"step", step}, {"event", "diverged"}, {"loss", nullptr}, {"lr", lr}});
            return res;
        }
        loss_sum += loss;
        ++loss_count;
        const std::int64_t done = step + 1;
        const double seconds = progress.elapsed() - start;
        progress(fmt::format("epoch {}/{} step {}/{} loss {:.4f} {:.0f} samples/s ETA {}",
                             step / per_epoch + 1, cfg.epochs, done, total, loss_sum / loss_count,
                             done * cfg.batch_size / std::max(seconds, 1e-9),
                             format_duration(seconds / done * (total - done))));
        if (cfg.checkpoint_every > 0 && done % cfg.checkpoint_every == 0)
            save_model_file((out / fmt::format("checkpoint-{}.bin", done)).string(), description,
                            done, layout, trainer.params());
        if (done % eval_every != 0 && done != total) continue;
        const auto& last_eval = res.last_eval = trainer.evaluate(data.test, cfg.eval_batch);
        const double train_loss = loss_sum / loss_count;
        res.train_loss = train_loss;
        const double epoch = static_cast<double>(done) / per_epoch;
        json::Json rec = {{"step", done},
                          {"epoch", epoch},
                          {"time", seconds},
                          {"train_loss", train_loss},
                          {"test_loss", last_eval.loss},
                          {"lr", lr},
                          {"samples_per_s", done * cfg.batch_size / std::max(seconds, 1e-9)}};
        if (last_eval.accuracy) rec["test_accuracy"] = *last_eval.accuracy;
        if (res.text) rec["test_bpc"] = text_metrics::bits_per_char(last_eval.loss);
        metrics.write(rec);
        if (std::isfinite(last_eval.loss)) {
            save_model_file(res.model_path, description, done, layout, trainer.params());
            saved_step = done;
        }
        if (!res.accuracy_hit && cfg.target_accuracy && last_eval.accuracy &&
            *last_eval.accuracy >= *cfg.target_accuracy)
            res.accuracy_hit = TargetHit{done, epoch, seconds};
        if (!res.loss_hit && cfg.target_loss && last_eval.loss <= *cfg.target_loss)
            res.loss_hit = TargetHit{done, epoch, seconds};
        if (res.text)
            progress(fmt::format("epoch {:.1f}: train loss {:.4f}, test loss {}", epoch, train_loss,
                                 text_metrics::format_loss(last_eval.loss)),
                     true);
        else
            progress(fmt::format("epoch {:.1f}: train loss {:.4f}, test loss {:.4f}{}", epoch,
                                 train_loss, last_eval.loss,
                                 last_eval.accuracy ? fmt::format(", test accuracy {:.2f}%",
                                                                  100 * *last_eval.accuracy)
                                                    : std::string()),
                     true);
        loss_sum = 0;
        loss_count = 0;
    }
    progress.done();
    res.seconds = progress.elapsed() - start;
    res.model = description;
    res.train_samples = data.train.size();
    res.test_samples = data.test.size();
    res.steps = total;
    res.steps_per_epoch = per_epoch;
    res.optimum_loss = data.optimum_loss;
    if (data.optimum_loss)
        res.final_train_loss =
            trainer.model().evaluate(trainer.params(), data.train, cfg.eval_batch).loss;
    if (trainer.multirate()) {
        const auto work = trainer.work();
        res.partitions.assign(work.begin(), work.end());
    }
    return res;
}

}  // namespace gossamer::peer
