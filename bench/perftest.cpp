#include "perftest.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>
#include <vector>

namespace gossamer::bench {
CommandOutput run_command(const std::string& command) {
    CommandOutput o;
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    if (!pipe) return o;
    std::array<char, 4096> buf{};
    std::size_t got = 0;
    while ((got = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) o.text.append(buf.data(), got);
    o.status = pclose(pipe);
    return o;
}

namespace {

// The "overall" column of the Final: line: latency (us) for _lat tests, bandwidth (MB/s) for
// _bw tests. Columns: iterations, p50, average and overall latency, average and overall
// bandwidth, average and overall message rate.
bool parse_final(const std::string& text, bool latency, double& value) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("Final:", 0) != 0) continue;
        std::istringstream fields(line.substr(6));
        std::vector<double> v;
        for (double x; fields >> x;) v.push_back(x);
        if (v.size() < 8) return false;
        value = latency ? v[3] : v[5];
        return true;
    }
    return false;
}

}  // namespace

std::string last_line(const std::string& text) {
    std::istringstream in(text);
    std::string last;
    for (std::string line; std::getline(in, line);)
        if (line.find_first_not_of(" \t") != std::string::npos) last = line;
    return last;
}

PerftestResult run_perftest(const std::string& program, const std::string& test, std::size_t bytes,
                            int iterations, const std::string& extra, const std::string& env) {
    PerftestResult r;
    if (run_command(fmt::format("command -v {} >/dev/null", program)).status != 0) {
        r.error = fmt::format("{} not found (scripts/deps.sh --bench installs ucx-utils)", program);
        return r;
    }
    // Server and client on CPUs of their own when taskset exists (as the bench pins its two
    // processes). The server runs in the background; the client retries until it listens. A
    // failed run (a port taken meanwhile, a server that missed the client) is tried again.
    std::string pin0, pin1;
    if (std::thread::hardware_concurrency() >= 2 &&
        run_command("command -v taskset >/dev/null").status == 0) {
        pin0 = "taskset -c 0 ";
        pin1 = "taskset -c 1 ";
    }
    const bool latency = test.find("lat") != std::string::npos;
    static int calls = 0;  // a fresh port per run: the last one may linger in TIME_WAIT
    for (int run_no = 0; run_no < 3; ++run_no) {
        const int port = 20000 + static_cast<int>((getpid() * 37 + calls++ * 7) % 20000);
        const auto args =
            fmt::format("-t {} -s {} -n {} -p {} {}", test, bytes, iterations, port, extra);
        const std::string prefix = env.empty() ? "" : env + " ";
        CommandOutput server;
        std::thread srv([&] {
            server = run_command(fmt::format("{}timeout 120 {}{} {}", prefix, pin0, program, args));
        });
        CommandOutput client;
        for (int attempt = 0; attempt < 50; ++attempt) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            client = run_command(
                fmt::format("{}timeout 120 {}{} localhost {}", prefix, pin1, program, args));
            if (client.status == 0) break;
        }
        srv.join();
        if (client.status == 0 && parse_final(client.text, latency, r.value)) {
            r.ok = true;
            r.error.clear();
            return r;
        }
        r.error = fmt::format("{} {} failed: {}", program, test,
                              last_line(client.text.empty() ? server.text : client.text));
    }
    return r;
}

}  // namespace gossamer::bench
