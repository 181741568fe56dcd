#pragma once
// A temporary folder for a test's files, removed when the test ends.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace gossamer::test {

class TempDir {
  public:
    TempDir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "gossamer-test-XXXXXX").string();
        if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    /// Writes `text` to a file in the folder and returns its full path.
    std::string write(const std::string& name, const std::string& text) const {
        auto p = path_ / name;
        std::ofstream(p, std::ios::binary) << text;
        return p.string();
    }

  private:
    std::filesystem::path path_;
};

}  // namespace gossamer::test
