#pragma once
// Sends fd 2 to a file for its lifetime; text() gives what was written meanwhile (the log lines
// of code under test that writes to stderr).

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/temp_dir.hpp"

namespace gossamer::test {

class StderrCapture {
  public:
    StderrCapture() : path_(dir_.path() / "stderr") {
        std::fflush(stderr);
        saved_ = dup(STDERR_FILENO);
        const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    ~StderrCapture() { restore(); }
    StderrCapture(const StderrCapture&) = delete;
    StderrCapture& operator=(const StderrCapture&) = delete;

    /// Restores fd 2 and returns what was written to it.
    std::string text() {
        restore();
        std::ifstream in(path_);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }

  private:
    void restore() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        dup2(saved_, STDERR_FILENO);
        close(saved_);
        saved_ = -1;
    }
    TempDir dir_;
    std::filesystem::path path_;
    int saved_ = -1;
};

}  // namespace gossamer::test
