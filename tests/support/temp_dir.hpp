#pragma once
// A temporary folder for a test's files, removed when the test ends; reading a file back.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
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

/// The whole contents of a file, byte for byte ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace gossamer::test
