// The device benchmark as a program of its own, for machines that have CUDA but not the rest of
// Gossamer's dependencies (scripts/gpu_check.sh builds it with nvcc alone).
// Usage: gpu_bench [--bytes MIB] [--repeats N] [--json FILE]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>

#include "gossamer/core/error.hpp"
#include "mix_device.hpp"

int main(int argc, char** argv) {
    gossamer::bench::MixDeviceOptions o;
    std::string json_path;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!value || (arg != "--bytes" && arg != "--repeats" && arg != "--json")) {
            std::fprintf(stderr,
                         "gpu_bench: usage: gpu_bench [--bytes MIB] [--repeats N] "
                         "[--json FILE] (got '%s')\n",
                         arg.c_str());
            return 2;
        }
        ++i;
        if (arg == "--bytes") o.bytes = std::strtoull(value, nullptr, 10) << 20;
        if (arg == "--repeats") o.repeats = std::max(1, std::atoi(value));
        if (arg == "--json") json_path = value;
    }
    o.progress = [](std::string_view line) {
        std::fprintf(stderr, "%.*s\n", int(line.size()), line.data());
    };
    try {
        const auto report = gossamer::bench::run_mix_device(o);
        std::cout << report.to_text();
        if (!json_path.empty()) {
            std::ofstream out(json_path);
            out << report.to_json().dump(2) << "\n";
            if (!out) throw gossamer::Error("gpu_bench: cannot write " + json_path);
        }
    } catch (const gossamer::ConfigError& e) {
        std::fprintf(stderr, "gpu_bench: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpu_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
