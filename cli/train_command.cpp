// gossamer train --config FILE: one process trains one model (docs/modules/train.md).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/blas.hpp"
#include "gossamer/core/memory.hpp"
#include "gossamer/core/metrics.hpp"
#include "gossamer/core/model_file.hpp"
#include "gossamer/core/output_dir.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"
#include "gossamer/optimizers/local/training_config.hpp"

namespace gossamer::cli {
namespace {

namespace optim = gossamer::optim;

struct Summary {
    json::Json j = json::Json::object();
    std::vector<std::pair<std::string, std::string>> rows;
    void add(std::string key, std::string text, json::Json value) {
        rows.emplace_back(key, std::move(text));
        j[key] = std::move(value);
    }
};

// The first evaluation at which a target was met.
struct TargetHit {
    std::int64_t step = 0;
    double epoch = 0, seconds = 0;
};

}  // namespace

int run_train(const std::vector<std::string>& args) {
    ArgParser p("gossamer train", "--config FILE [options]",
                "Trains one model in one process as the training config says: progress on "
                "stderr, metrics as JSON lines (OUT/metrics.jsonl), the model file "
                "(OUT/model.bin), and a summary table (or --json). Exit status 3 when the loss "
                "becomes NaN or infinite (the last good model file is kept).",
                {{"config", "FILE", "the training config (docs/formats/train-config.md)"},
                 {"out", "DIR", "output folder (default: the config's output.dir)"},
                 {"epochs", "N", "override training.epochs"},
                 {"threads", "N", "override training.threads (BLAS threads)"},
                 {"json", "", "print the summary as JSON"}},
                0);
    auto a = p.parse(args);
    if (a.help) return std::cout << p.help(), 0;
    if (!a.value("config")) throw UsageError("gossamer train: --config FILE is required");

    // Everything is loaded and checked before the output folder is touched.
    Progress progress(30.0);
    auto cfg = optim::load_training_config(*a.value("config"));
    if (auto out = a.value("out")) cfg.output_dir = *out;
    cfg.epochs = static_cast<int>(a.integer("epochs", cfg.epochs, 1, 100000));
    cfg.threads = static_cast<int>(a.integer("threads", cfg.threads, 1, 256));
    set_blas_threads(cfg.threads);
    progress(fmt::format("loading {}", cfg.data.name));
    auto data = optim::load_training_data(cfg);
    optim::check_batch_size(cfg, data.train.size());
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
    const OutputOrigin origin =
        a.value("out") ? OutputOrigin{"", "--out"} : OutputOrigin{cfg.doc.file, "output.dir"};
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
    const std::string model_path = (out / "model.bin").string();
    MetricsWriter metrics((out / "metrics.jsonl").string());
    const std::int64_t eval_every = cfg.eval_every > 0 ? cfg.eval_every : per_epoch;

    double loss_sum = 0, epoch_loss = 0;
    std::int64_t loss_count = 0, saved_step = -1;
    EvalResult last_eval;
    std::optional<TargetHit> acc_hit, loss_hit;
    const double start = progress.elapsed();
    for (std::int64_t step = 0; step < total; ++step) {
        const double lr = trainer.lr();
        const double loss = trainer.step();
        if (!std::isfinite(loss)) {
            progress.done();
            std::cerr << fmt::format(
                "error: the training loss became {} at step {} (epoch {}) with learning rate {:g}; "
                "lower optimizer.lr or add a warm-up. {}\n",
                std::isnan(loss) ? "NaN" : "infinite", step, step / per_epoch + 1, lr,
                saved_step >= 0
                    ? fmt::format("The last good model is {} (step {}).", model_path, saved_step)
                    : std::string("No model file was written."));
            metrics.write({{"step", step}, {"event", "diverged"}, {"loss", nullptr}, {"lr", lr}});
            return 3;
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
        last_eval = trainer.evaluate(data.test, cfg.eval_batch);
        const double train_loss = loss_sum / loss_count;
        epoch_loss = train_loss;
        const double epoch = static_cast<double>(done) / per_epoch;
        json::Json rec = {{"step", done},
                          {"epoch", epoch},
                          {"time", seconds},
                          {"train_loss", train_loss},
                          {"test_loss", last_eval.loss},
                          {"lr", lr},
                          {"samples_per_s", done * cfg.batch_size / std::max(seconds, 1e-9)}};
        if (last_eval.accuracy) rec["test_accuracy"] = *last_eval.accuracy;
        metrics.write(rec);
        if (std::isfinite(last_eval.loss)) {
            save_model_file(model_path, description, done, layout, trainer.params());
            saved_step = done;
        }
        if (!acc_hit && cfg.target_accuracy && last_eval.accuracy &&
            *last_eval.accuracy >= *cfg.target_accuracy)
            acc_hit = TargetHit{done, epoch, seconds};
        if (!loss_hit && cfg.target_loss && last_eval.loss <= *cfg.target_loss)
            loss_hit = TargetHit{done, epoch, seconds};
        progress(fmt::format("epoch {:.1f}: train loss {:.4f}, test loss {:.4f}{}", epoch,
                             train_loss, last_eval.loss,
                             last_eval.accuracy
                                 ? fmt::format(", test accuracy {:.2f}%", 100 * *last_eval.accuracy)
                                 : std::string()),
                 true);
        loss_sum = 0;
        loss_count = 0;
    }
    progress.done();
    const double seconds = progress.elapsed() - start;

    Summary s;
    s.add("config", *a.value("config"), *a.value("config"));
    s.add("model", description, description);
    s.add("data",
          fmt::format("{}: {} train, {} test", cfg.data.name, data.train.size(), data.test.size()),
          {{"name", cfg.data.name}, {"train", data.train.size()}, {"test", data.test.size()}});
    s.add("steps",
          fmt::format("{} ({} epochs of {} batches of {})", total, cfg.epochs, per_epoch,
                      cfg.batch_size),
          total);
    s.add("time",
          fmt::format("{:.1f} s ({:.0f} samples/s, {} BLAS thread{})", seconds,
                      total * cfg.batch_size / std::max(seconds, 1e-9), cfg.threads,
                      cfg.threads == 1 ? "" : "s"),
          seconds);
    s.add("train_loss", fmt::format("{:.6f} (mean over the last evaluation interval)", epoch_loss),
          epoch_loss);
    s.add("test_loss", fmt::format("{:.6f}", last_eval.loss), last_eval.loss);
    if (last_eval.accuracy)
        s.add("test_accuracy", fmt::format("{:.2f}%", 100 * *last_eval.accuracy),
              *last_eval.accuracy);
    auto target = [&](const char* key, std::optional<double> goal,
                      const std::optional<TargetHit>& hit, bool percent) {
        if (!goal) return;
        const std::string g =
            percent ? fmt::format("{:.2f}%", 100 * *goal) : fmt::format("{:g}", *goal);
        if (hit)
            s.add(key,
                  fmt::format("{} reached at step {} (epoch {:.2f}, {:.1f} s)", g, hit->step,
                              hit->epoch, hit->seconds),
                  {{"goal", *goal},
                   {"step", hit->step},
                   {"epoch", hit->epoch},
                   {"seconds", hit->seconds}});
        else
            s.add(key, fmt::format("{} not reached", g), {{"goal", *goal}, {"step", nullptr}});
    };
    target("target_accuracy", cfg.target_accuracy, acc_hit, true);
    target("target_loss", cfg.target_loss, loss_hit, false);
    if (data.optimum_loss) {
        const double final_train =
            trainer.model().evaluate(trainer.params(), data.train, cfg.eval_batch).loss;
        s.add("optimum_loss",
              fmt::format("{:.6f}; training loss at the end {:.6f} (gap {:.2e})",
                          *data.optimum_loss, final_train, final_train - *data.optimum_loss),
              {{"optimum", *data.optimum_loss},
               {"final_train_loss", final_train},
               {"gap", final_train - *data.optimum_loss}});
    }
    if (trainer.multirate()) {
        // Multirate: what each partition did (docs/algorithms/multirate.md).
        std::string line;
        json::Json parts = json::Json::array();
        for (const auto& w : trainer.work()) {
            line += fmt::format("{}{}: {} updates, {:.3f} backward GMAC", line.empty() ? "" : "; ",
                                w.name, w.updates, static_cast<double>(w.backward_macs) / 1e9);
            parts.push_back(
                {{"name", w.name}, {"updates", w.updates}, {"backward_macs", w.backward_macs}});
        }
        s.add("partitions", line, parts);
    }
    s.add("model_file", model_path, model_path);
    s.add("metrics", metrics.path(), metrics.path());
    if (a.flag("json")) {
        std::cout << s.j.dump(2) << "\n";
    } else {
        for (const auto& [k, v] : s.rows) std::cout << fmt::format("  {:<16} {}\n", k, v);
    }
    return 0;
}

}  // namespace gossamer::cli
