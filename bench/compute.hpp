#pragma once
/// `gossamer bench compute`: training throughput of the built-in models beside PyTorch.

#include <string>
#include <vector>

#include "gossamer/core/json.hpp"

namespace gossamer::bench {

struct ComputeOptions {
    std::vector<std::string> models = {"mlp", "cnn", "gpt_tiny", "gpt_lab"};
    int batch = 0;          ///< 0: each model's own (mlp, cnn 64; gpt_tiny 16; gpt_lab 8)
    double seconds = 3.0;   ///< measuring time per model and per side
    bool reference = true;  ///< run bench/torch_ref.py
    std::string python = "/usr/bin/python3";
    std::string script;  ///< torch_ref.py; default: $GOSSAMER_BENCH_DIR or the source tree
};

struct ComputeRow {
    std::string model, description;
    int batch = 0;
    double gossamer = 0;   ///< samples/s, forward + backward + SGD step
    double reference = 0;  ///< PyTorch samples/s (0 when not measured)
    double target = 0;     ///< the ratio the issue asks for
};

struct ComputeReport {
    std::vector<ComputeRow> rows;
    std::string blas_core, torch_version, reference_error;
    json::Json to_json() const;
    std::string to_text() const;
};

/// Measures every model, then the reference. Throws ConfigError for an unknown model name.
ComputeReport run_compute(const ComputeOptions& options);

}  // namespace gossamer::bench
