// The replay driver (docs/operations/reliability.md, "Fuzzing"): feeds every file of the folders
// (or the files) it is given to the same LLVMFuzzerTestOneInput that libFuzzer drives, so that an
// ordinary build without clang replays the seed corpus and every regression input. A crash or a
// broken invariant aborts with the input's name on stderr; a folder that is missing or holds no
// input fails, so a test cannot pass on nothing.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_support.hpp"

namespace {

char current[4096] = "";

void report(int sig) {
    const char* head = "fuzz replay: the input that failed: ";
    (void)!::write(2, head, std::strlen(head));
    (void)!::write(2, current, std::strlen(current));
    (void)!::write(2, "\n", 1);
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s FOLDER_OR_FILE...: replays each input\n", argv[0]);
        return 2;
    }
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, report);
    std::size_t total = 0;
    for (int a = 1; a < argc; ++a) {
        std::vector<fs::path> inputs;
        std::error_code ec;
        if (fs::is_directory(argv[a], ec)) {
            for (const auto& e : fs::directory_iterator(argv[a], ec))
                if (e.is_regular_file()) inputs.push_back(e.path());
        } else if (fs::is_regular_file(argv[a], ec)) {
            inputs.emplace_back(argv[a]);
        }
        if (inputs.empty()) {
            std::fprintf(stderr, "%s: no inputs (a missing or empty folder); give a corpus\n",
                         argv[a]);
            return 1;
        }
        std::sort(inputs.begin(), inputs.end());
        for (const auto& p : inputs) {
            std::snprintf(current, sizeof current, "%s", p.c_str());
            std::ifstream in(p, std::ios::binary);
            std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                            std::istreambuf_iterator<char>());
            LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
        }
        std::printf("%s: replayed %zu inputs\n", argv[a], inputs.size());
        total += inputs.size();
    }
    std::printf("replayed %zu inputs, none failed\n", total);
    return 0;
}
