#include "compute.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "gossamer/core/blas.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/models.hpp"
#include "gossamer/core/params.hpp"
#include "gossamer/core/rng.hpp"
#include "gossamer/optimizers/local/local_optimizer.hpp"

namespace gossamer::bench {
namespace {

struct Spec {
    std::unique_ptr<Model> model;
    double target;
    int batch;  // the batch the issue asks for
};

// The GPTs of issue 42, on the King James Bible's 63 characters (the newline included).
std::unique_ptr<Model> gpt(int layers, int heads, int width, int context) {
    models::GptSpec s;
    s.vocab = 63, s.layers = layers, s.heads = heads, s.width = width, s.context = context;
    return models::gpt(s);
}

Spec make(const std::string& name) {
    if (name == "mlp") return {models::mlp(784, {256, 128}, 10), 1.0, 64};
    if (name == "cnn") return {models::cnn(models::CnnSpec{}), 0.7, 64};
    if (name == "gpt_tiny") return {gpt(2, 4, 128, 64), 0.8, 16};
    if (name == "gpt_lab") return {gpt(4, 4, 192, 64), 0.8, 8};
    throw ConfigError("", "--models", fmt::format("unknown model \"{}\"", name),
                      "use mlp, cnn, gpt_tiny and/or gpt_lab");
}

// Samples per second of forward + backward + SGD step on one fixed random batch: what
// torch_ref.py times for the same shapes. Language models get windows of random token ids.
double measure(Model& model, int batch, double seconds) {
    Rng rng(42);
    const int features = model.input_features(), classes = model.classes();
    const bool tokens = dynamic_cast<models::LanguageModel*>(&model) != nullptr;
    std::vector<float> x(static_cast<std::size_t>(batch) * features);
    std::vector<std::int32_t> y(static_cast<std::size_t>(batch));
    for (auto& v : x)
        v = tokens ? static_cast<float>(rng.below(classes)) : static_cast<float>(rng.normal());
    for (int i = 0; i < batch; ++i)
        y[i] = tokens
                   ? static_cast<std::int32_t>(x[(i + 1) * static_cast<std::size_t>(features) - 1])
                   : static_cast<std::int32_t>(rng.below(classes));
    Batch b{batch, features, x.data(), y.data(), nullptr};
    ParamVector params(model.parameter_count()), grad(model.parameter_count());
    model.init(params.span(), 1);
    optim::OptimizerConfig sgd;
    sgd.lr = 0.01;
    auto opt = optim::make_optimizer(sgd, params.size());
    auto step = [&] {
        model.loss_and_gradient(params.span(), b, grad.span());
        opt->step(params.span(), grad.span());
    };
    for (int i = 0; i < 10; ++i) step();  // warm-up, as the reference does
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    std::int64_t steps = 0;
    double elapsed = 0;
    do {
        step();
        ++steps;
        elapsed = std::chrono::duration<double>(clock::now() - start).count();
    } while (elapsed < seconds || steps < 5);
    return static_cast<double>(steps) * batch / elapsed;
}

std::string default_script() {
    if (const char* dir = std::getenv("GOSSAMER_BENCH_DIR"); dir && *dir)
        return std::string(dir) + "/torch_ref.py";
    return std::string(GOSSAMER_SOURCE_BENCH_DIR) + "/torch_ref.py";
}

// Runs the reference; fills the rows or says why it could not.
void run_reference(const ComputeOptions& o, ComputeReport& report) {
    std::string models;  // name:batch,...
    for (const auto& row : report.rows)
        models += fmt::format("{}{}:{}", models.empty() ? "" : ",", row.model, row.batch);
    const std::string script = o.script.empty() ? default_script() : o.script;
    const std::string cmd =
        fmt::format("'{}' '{}' --seconds {} --models {} 2>&1", o.python, script, o.seconds, models);
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) {
        report.reference_error = "cannot start " + o.python;
        return;
    }
    std::string out;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    const int status = pclose(pipe);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    json::Json j;
    try {
        if (code != 0) throw std::runtime_error("");
        j = json::Json::parse(out.substr(out.rfind('{')));
    } catch (...) {
        while (!out.empty() && out.back() == '\n') out.pop_back();
        report.reference_error = fmt::format(
            "{} exited with status {}: {}{}", script, code, out.substr(out.rfind('\n') + 1),
            code == 3 ? "" : "; install PyTorch with scripts/deps.sh --bench");
        return;
    }
    report.torch_version = j.value("torch", "?");
    for (auto& row : report.rows) row.reference = j.value(row.model, 0.0);
}

}  // namespace

ComputeReport run_compute(const ComputeOptions& o) {
    ComputeReport report;
    std::vector<Spec> specs;
    for (const auto& name : o.models) specs.push_back(make(name));  // all names checked first
    set_blas_threads(1);
    report.blas_core = blas_core();
    for (std::size_t i = 0; i < specs.size(); ++i) {
        ComputeRow row;
        row.model = o.models[i];
        row.description = specs[i].model->describe();
        row.target = specs[i].target;
        row.batch = o.batch > 0 ? o.batch : specs[i].batch;
        row.gossamer = measure(*specs[i].model, row.batch, o.seconds);
        report.rows.push_back(row);
    }
    if (o.reference) run_reference(o, report);
    return report;
}

json::Json ComputeReport::to_json() const {
    json::Json j = {
        {"blas_core", blas_core}, {"torch", torch_version}, {"rows", json::Json::array()}};
    if (!reference_error.empty()) j["reference_error"] = reference_error;
    for (const auto& r : rows) {
        json::Json row = {{"model", r.model},
                          {"description", r.description},
                          {"batch", r.batch},
                          {"gossamer_samples_per_s", r.gossamer},
                          {"torch_samples_per_s", r.reference},
                          {"target_ratio", r.target}};
        row["ratio"] = r.reference > 0 ? json::Json(r.gossamer / r.reference) : json::Json(nullptr);
        j["rows"].push_back(row);
    }
    return j;
}

std::string ComputeReport::to_text() const {
    std::string out = fmt::format(
        "training throughput in samples/s, one thread (forward + backward + SGD step); OpenBLAS "
        "kernels: {}; PyTorch {}\n",
        blas_core, torch_version.empty() ? "not measured" : torch_version);
    out += fmt::format("{:<9} {:>5} {:>16} {:>16} {:>8} {:>8}  {}\n", "model", "batch",
                       "gossamer [1/s]", "pytorch [1/s]", "ratio", "target", "");
    for (const auto& r : rows) {
        const bool have = r.reference > 0;
        const double ratio = have ? r.gossamer / r.reference : 0;
        out += fmt::format("{:<9} {:>5} {:>16.0f} {:>16} {:>8} {:>8}  {}\n", r.model, r.batch,
                           r.gossamer, have ? fmt::format("{:.0f}", r.reference) : "-",
                           have ? fmt::format("{:.2f}", ratio) : "-",
                           fmt::format(">= {:.1f}", r.target),
                           have ? (ratio >= r.target ? "ok" : "BELOW TARGET") : "");
    }
    if (!reference_error.empty()) out += "reference: " + reference_error + "\n";
    return out;
}

}  // namespace gossamer::bench
