// cli/ only parses and prints (issue 38): every cli/*_command.cpp stays at most 200 lines; job
// logic lives in the modules (sim/sweep.hpp, launch/launch_job.hpp, peer/job_setup.hpp,
// peer/train_job.hpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

int count_lines(const std::filesystem::path& file) {
    std::ifstream in(file);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
}

}  // namespace

TEST_CASE("every cli/*_command.cpp is at most 200 lines") {
    const std::filesystem::path cli = std::filesystem::path(GOSSAMER_SOURCE_DIR) / "cli";
    REQUIRE(std::filesystem::is_directory(cli));
    int commands = 0;
    for (const auto& entry : std::filesystem::directory_iterator(cli)) {
        const std::string name = entry.path().filename().string();
        const std::string suffix = "_command.cpp";
        if (name.size() <= suffix.size() ||
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        ++commands;
        const int lines = count_lines(entry.path());
        INFO("cli/" << name << " has " << lines
                    << " lines; move job logic into its module, or split the parsing and "
                       "printing into another cli/*_command.cpp");
        CHECK(lines <= 200);
    }
    CHECK(commands >= 9);  // topo, train, bench, sim, launch, peer, eval, lab, report
}
