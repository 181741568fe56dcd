#include "gossamer/core/metrics.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gossamer/core/error.hpp"

namespace gossamer {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
    std::error_code ec;
    const auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    file_.reset(std::fopen(path.c_str(), "w"));
    if (!file_)
        throw ConfigError(path, "",
                          fmt::format("cannot create metrics file: {}", std::strerror(errno)),
                          "choose a writable output folder");
}

void MetricsWriter::write(const json::Json& record) {
    const std::string line = record.dump() + "\n";
    if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() ||
        std::fflush(file_.get()) != 0)
        throw Error(fmt::format("{}: cannot write metrics: {}", path_, std::strerror(errno)));
}

std::vector<json::Json> read_json_lines(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw ConfigError(path, "", "cannot open file", "check the path");
    std::vector<json::Json> out;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.empty()) continue;
        try {
            out.push_back(json::Json::parse(line));
        } catch (const json::Json::exception&) {
            throw ConfigError(fmt::format("{}:{}", path, n), "", "malformed JSON line",
                              "each line must be one JSON object");
        }
    }
    return out;
}

}  // namespace gossamer
