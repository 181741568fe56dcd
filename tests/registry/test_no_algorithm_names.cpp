// The registry is the one list (issue 38): the drivers (sim/, peer/, launch/, cli/) name no
// algorithm and no protocol class, the registry's list is one line per algorithm folder, and the
// docs' list of algorithms is the registry's. Reads the sources under GOSSAMER_SOURCE_DIR.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gossamer/optimizers/protocol/registry.hpp"
#include "source_scan.hpp"

namespace fs = std::filesystem;
using source_scan::has_word;

namespace {

const fs::path kRoot = GOSSAMER_SOURCE_DIR;
const std::vector<std::string> kDrivers = {"sim", "peer", "launch", "cli"};

// What a driver may still say, each with its reason: a file (relative to the root), a name that
// may appear in its string literals.
struct Allowed {
    std::string file, name, reason;
};
const std::string kBench =
    "`gossamer bench allreduce` is the benchmark subcommand (our ring against MPI_Allreduce, "
    "bench/allreduce.hpp), not the algorithm";
const std::vector<Allowed> kAllowed = {
    {"cli/bench_command.cpp", "allreduce", kBench},
    {"cli/bench_allreduce_command.cpp", "allreduce", kBench},
};

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<fs::path> driver_sources() {
    std::vector<fs::path> files;
    for (const auto& dir : kDrivers)
        for (const auto& e : fs::recursive_directory_iterator(kRoot / dir)) {
            const auto ext = e.path().extension();
            if (e.is_regular_file() && (ext == ".cpp" || ext == ".hpp" || ext == ".h"))
                files.push_back(e.path());
        }
    std::sort(files.begin(), files.end());
    return files;
}

// The classes deriving from Protocol in the algorithm folders' public headers.
std::set<std::string> protocol_classes() {
    std::set<std::string> classes;
    const std::regex derived(R"(class\s+(\w+)\s+(?:final\s+)?:\s*public\s+(?:proto::)?Protocol\b)");
    for (const auto& e : fs::recursive_directory_iterator(kRoot / "optimizers/protocols")) {
        if (!e.is_regular_file() || e.path().extension() != ".hpp") continue;
        const std::string text = read(e.path());
        for (std::sregex_iterator m(text.begin(), text.end(), derived), end; m != end; ++m)
            classes.insert((*m)[1]);
    }
    return classes;
}

std::string fmt_line(const std::string& file, int line, const std::string& what) {
    return line > 0 ? file + ":" + std::to_string(line) + ": " + what : file + ": " + what;
}

bool allowed(const std::string& file, const std::string& name) {
    return std::any_of(kAllowed.begin(), kAllowed.end(),
                       [&](const Allowed& a) { return a.file == file && a.name == name; });
}

// Every way `text` (the file `file`) names an algorithm or a protocol class: one line each.
std::vector<std::string> findings(const std::string& file, const std::string& text,
                                  const std::vector<std::string>& names,
                                  const std::set<std::string>& classes) {
    std::vector<std::string> found;
    const auto scanned = source_scan::scan(text);
    for (const auto& lit : scanned.literals) {
        if (lit.text.starts_with("gossamer/optimizers/protocols/"))
            found.push_back(
                fmt_line(file, lit.line, "includes an algorithm's header \"" + lit.text + "\""));
        for (const auto& name : names)
            if (has_word(lit.text, name) && !allowed(file, name))
                found.push_back(fmt_line(file, lit.line,
                                         "names algorithm " + name + " in \"" + lit.text + "\""));
    }
    for (const auto& cls : classes)
        if (has_word(scanned.code, cls))
            found.push_back(fmt_line(file, 0, "names protocol class " + cls));
    return found;
}

}  // namespace

TEST_CASE("the scanner finds names in literals and classes in code, never in comments") {
    const std::vector<std::string> names = {"dpsgd", "async"};
    const std::set<std::string> classes = {"Dpsgd"};
    const auto f = [&](const std::string& text) { return findings("x.cpp", text, names, classes); };
    CHECK(f("if (s.algorithm == \"dpsgd\") return;").size() == 1);
    CHECK(f("throw Error(\"simulate algorithm async, or drop\");").size() == 1);
    CHECK(f("auto* d = dynamic_cast<const proto::Dpsgd*>(&p);").size() == 1);
    CHECK(f("#include \"gossamer/optimizers/protocols/dpsgd/dpsgd.hpp\"").size() == 2);
    CHECK(f("x = R\"(a \"dpsgd\" run)\";").size() == 1);
    CHECK(f("// if (s.algorithm == \"dpsgd\")\n/* \"async\" */ int n = 1'000;").empty());
    CHECK(f("\"all-reduce\", \"async-signal-safe\", \"dpsgd_x\", DpsgdOptions o;").size() == 1);
    CHECK(f("char q = '\"'; auto s = \"dpsgd\";")[0] ==
          "x.cpp:1: names algorithm dpsgd in \"dpsgd\"");
}

TEST_CASE("sim, peer, launch and cli name no algorithm and no protocol class") {
    const auto names = gossamer::proto::protocol_names();
    const auto classes = protocol_classes();
    REQUIRE(classes.size() >= names.size());  // the scan found the protocol classes
    REQUIRE(classes.contains("AllreduceProtocol"));
    const auto files = driver_sources();
    REQUIRE(files.size() > 50);
    std::vector<std::string> found;
    for (const auto& path : files) {
        const auto file = fs::relative(path, kRoot).generic_string();
        for (auto& line : findings(file, read(path), names, classes)) found.push_back(line);
    }
    std::string report;
    for (const auto& line : found) report += "\n  " + line;
    INFO(
        "ask the algorithm's registry entry or the Protocol instead (registry.hpp, "
        "questions.hpp), or allow-list the file with its reason:"
        << report);
    CHECK(found.empty());
    // Each allow-list entry still holds: its file exists and says the name.
    for (const auto& a : kAllowed) {
        CAPTURE(a.file);
        REQUIRE(fs::exists(kRoot / a.file));
        const auto scanned = source_scan::scan(read(kRoot / a.file));
        CHECK(std::any_of(scanned.literals.begin(), scanned.literals.end(),
                          [&](const auto& lit) { return has_word(lit.text, a.name); }));
    }
}

TEST_CASE("the registry's list is one line per algorithm folder, in the registry's order") {
    const std::string list = read(kRoot / "optimizers/protocol/src/algorithm_list.hpp");
    const std::regex line(R"(^GOSSAMER_ALGORITHM\((\w+)\)$)", std::regex::multiline);
    std::vector<std::string> listed;
    for (std::sregex_iterator m(list.begin(), list.end(), line), end; m != end; ++m)
        listed.push_back((*m)[1]);
    CHECK(listed == gossamer::proto::protocol_names());
    std::vector<std::string> folders;
    for (const auto& e : fs::directory_iterator(kRoot / "optimizers/protocols"))
        if (e.is_directory()) folders.push_back(e.path().filename().string());
    std::sort(folders.begin(), folders.end());
    auto sorted = listed;
    std::sort(sorted.begin(), sorted.end());
    CHECK(folders == sorted);
    for (const auto& name : listed) {
        CAPTURE(name);
        CHECK(fs::exists(kRoot / "optimizers/protocols" / name / "src" / (name + "_entry.cpp")));
    }
}

TEST_CASE(
    "docs/algorithms/README.md lists the registry's algorithms, in its order, each with a page") {
    const std::string readme = read(kRoot / "docs/algorithms/README.md");
    const std::regex row(R"(^\| `(\w+)` \| \[(\w+)\.md\]\((\w+)\.md\) \|)", std::regex::multiline);
    std::vector<std::string> listed;
    for (std::sregex_iterator m(readme.begin(), readme.end(), row), end; m != end; ++m) {
        listed.push_back((*m)[1]);
        CHECK((*m)[2] == (*m)[1]);
        CHECK((*m)[3] == (*m)[1]);
        CHECK(fs::exists(kRoot / "docs/algorithms" / ((*m)[1].str() + ".md")));
    }
    CHECK(listed == gossamer::proto::protocol_names());
}
