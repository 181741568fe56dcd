#pragma once
// The final loss `gossamer sim` reports for a job: what real peers of the same files are
// compared with.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace gossamer::test {

/// The loss of the last metrics line of `algorithm` under `sim_out` (the folder given to
/// `gossamer sim --out`); -1 when there is none.
inline double sim_final_loss(const std::string& sim_out, const std::string& algorithm) {
    double loss = -1;
    for (const auto& d : std::filesystem::directory_iterator(sim_out + "/" + algorithm)) {
        std::ifstream in(d.path() / "metrics.jsonl");
        for (std::string line; std::getline(in, line);)
            if (!line.empty()) loss = nlohmann::json::parse(line)["loss"].get<double>();
    }
    return loss;
}

}  // namespace gossamer::test
