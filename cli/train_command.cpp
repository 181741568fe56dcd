// gossamer train --config FILE: one process trains one model (docs/modules/train.md). Parses the
// flags into the config and prints the summary; the job is peer/'s (gossamer/peer/train_job.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <optional>

#include "args.hpp"
#include "commands.hpp"
#include "gossamer/core/output_dir.hpp"
#include "gossamer/core/progress.hpp"
#include "gossamer/core/text_metrics.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/peer/train_job.hpp"

namespace gossamer::cli {
namespace {

struct Summary {
    json::Json j = json::Json::object();
    std::vector<std::pair<std::string, std::string>> rows;
    void add(std::string key, std::string text, json::Json value) {
        rows.emplace_back(key, std::move(text));
        j[key] = std::move(value);
    }
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
    const OutputOrigin origin =
        a.value("out") ? OutputOrigin{"", "--out"} : OutputOrigin{cfg.doc.file, "output.dir"};
    const auto r = peer::run_train_job(cfg, origin, progress);
    if (r.diverged) {
        const auto& d = *r.diverged;
        std::cerr << fmt::format(
            "error: the training loss became {} at step {} (epoch {}) with learning rate {:g}; "
            "lower optimizer.lr or add a warm-up. {}\n",
            d.nan ? "NaN" : "infinite", d.step, d.epoch, d.lr,
            d.saved_step >= 0
                ? fmt::format("The last good model is {} (step {}).", r.model_path, d.saved_step)
                : std::string("No model file was written."));
        return 3;
    }

    const auto& last_eval = r.last_eval;
    const double seconds = r.seconds;
    Summary s;
    s.add("config", *a.value("config"), *a.value("config"));
    s.add("model", r.model, r.model);
    s.add("data",
          fmt::format("{}: {} train, {} test", cfg.data.name, r.train_samples, r.test_samples),
          {{"name", cfg.data.name}, {"train", r.train_samples}, {"test", r.test_samples}});
    s.add("steps",
          fmt::format("{} ({} epochs of {} batches of {})", r.steps, cfg.epochs, r.steps_per_epoch,
                      cfg.batch_size),
          r.steps);
    s.add("time",
          fmt::format("{:.1f} s ({:.0f} samples/s, {} BLAS thread{})", seconds,
                      r.steps * cfg.batch_size / std::max(seconds, 1e-9), cfg.threads,
                      cfg.threads == 1 ? "" : "s"),
          seconds);
    s.add("train_loss",
          fmt::format("{:.6f} (mean over the last evaluation interval)", r.train_loss),
          r.train_loss);
    if (r.text) {
        // A language model: the loss in nats and bits per character instead of an accuracy.
        s.add("test_loss", text_metrics::format_loss(last_eval.loss), last_eval.loss);
        s.j["test_bpc"] = text_metrics::bits_per_char(last_eval.loss);
        if (last_eval.accuracy) s.j["test_accuracy"] = *last_eval.accuracy;
    } else {
        s.add("test_loss", fmt::format("{:.6f}", last_eval.loss), last_eval.loss);
    }
    if (last_eval.accuracy && !r.text)
        s.add("test_accuracy", fmt::format("{:.2f}%", 100 * *last_eval.accuracy),
              *last_eval.accuracy);
    auto target = [&](const char* key, std::optional<double> goal,
                      const std::optional<peer::TargetHit>& hit, bool percent) {
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
    target("target_accuracy", cfg.target_accuracy, r.accuracy_hit, true);
    target("target_loss", cfg.target_loss, r.loss_hit, false);
    if (r.optimum_loss) {
        const double final_train = *r.final_train_loss, optimum = *r.optimum_loss;
        s.add("optimum_loss",
              fmt::format("{:.6f}; training loss at the end {:.6f} (gap {:.2e})", optimum,
                          final_train, final_train - optimum),
              {{"optimum", optimum},
               {"final_train_loss", final_train},
               {"gap", final_train - optimum}});
    }
    if (!r.partitions.empty()) {
        // Multirate: what each partition did (docs/algorithms/multirate.md).
        std::string line;
        json::Json parts = json::Json::array();
        for (const auto& w : r.partitions) {
            line += fmt::format("{}{}: {} updates, {:.3f} backward GMAC", line.empty() ? "" : "; ",
                                w.name, w.updates, static_cast<double>(w.backward_macs) / 1e9);
            parts.push_back(
                {{"name", w.name}, {"updates", w.updates}, {"backward_macs", w.backward_macs}});
        }
        s.add("partitions", line, parts);
    }
    s.add("model_file", r.model_path, r.model_path);
    s.add("metrics", r.metrics_path, r.metrics_path);
    if (a.flag("json")) {
        std::cout << s.j.dump(2) << "\n";
    } else {
        for (const auto& [k, v] : s.rows) std::cout << fmt::format("  {:<16} {}\n", k, v);
    }
    return 0;
}

}  // namespace gossamer::cli
