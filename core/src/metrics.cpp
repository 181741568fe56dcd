#include "gossamer/core/metrics.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"

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
    const long whole = std::ftell(file_.get());  // every earlier line was flushed whole
    if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() ||
        std::fflush(file_.get()) != 0) {
        const int err = errno;
        // A full disk: a half-written line would read as a malformed record, so it is cut off.
        std::clearerr(file_.get());
        if (whole >= 0) {
            [[maybe_unused]] const int cut = ::ftruncate(::fileno(file_.get()), whole);
            std::fseek(file_.get(), whole, SEEK_SET);
        }
        throw IoError(fmt::format("{}: cannot write metrics: {}", path_, std::strerror(err)));
    }
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
