#pragma once
// Runs a command through the shell and captures its exit status, stdout and stderr.

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "support/temp_dir.hpp"

namespace gossamer::test {

struct RunResult {
    int status = -1;  ///< exit status, or -1 if the process did not exit normally
    std::string out, err;
};

inline RunResult run(const std::string& command) {
    TempDir dir;
    const auto err_path = (dir.path() / "stderr").string();
    RunResult r;
    FILE* pipe = popen((command + " 2>'" + err_path + "'").c_str(), "r");
    if (!pipe) return r;
    std::array<char, 4096> buf{};
    std::size_t got = 0;
    while ((got = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), got);
    const int raw = pclose(pipe);
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    std::ifstream in(err_path);
    std::stringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
    return r;
}

}  // namespace gossamer::test
