#pragma once
/// Metrics as JSON lines: one JSON object per line, written whole and flushed, so that a run that
/// stops early still leaves a readable file (every line but none half-written).

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gossamer/core/json.hpp"

namespace gossamer {

class MetricsWriter {
  public:
    /// Creates (truncates) `path`, making its parent folders. Throws ConfigError naming the path
    /// when it cannot be created.
    explicit MetricsWriter(const std::string& path);
    /// Appends one record as one line and flushes it.
    void write(const json::Json& record);
    const std::string& path() const noexcept { return path_; }

  private:
    struct Closer {
        void operator()(std::FILE* f) const noexcept { std::fclose(f); }
    };
    std::string path_;
    std::unique_ptr<std::FILE, Closer> file_;
};

/// Reads a JSON-lines file back (for tests and tools); throws ConfigError on a malformed line.
std::vector<json::Json> read_json_lines(const std::string& path);

}  // namespace gossamer
