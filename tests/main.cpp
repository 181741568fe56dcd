// The doctest main of every test binary, with one guard: a run filtered by --test-case that ran
// no test case fails. ctest runs each discovered case by name; a name the filter cannot match (a
// ';' ctest cuts, a ',' left unescaped) would otherwise run nothing and report a pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <string_view>

namespace {

std::atomic<int> g_cases_started{0};

struct CaseCounter : doctest::IReporter {
    explicit CaseCounter(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats&) override {}
    void test_case_start(const doctest::TestCaseData&) override { ++g_cases_started; }
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("case-counter", 1, CaseCounter);

}  // namespace

int main(int argc, char** argv) {
    bool filtered = false, query = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a(argv[i]);
        filtered |= a.starts_with("--test-case=") || a.starts_with("-tc=");
        query |= a.starts_with("--list") || a.starts_with("-l") || a.starts_with("--count") ||
                 a.starts_with("--help") || a.starts_with("--version") || a == "-h" ||
                 a.starts_with("--no-run");
    }
    doctest::Context context(argc, argv);
    const int rc = context.run();
    if (rc == 0 && filtered && !query && g_cases_started == 0) {
        std::fprintf(stderr,
                     "no test case matched the --test-case filter: it ran nothing (a name with "
                     "an unescaped ',' or a ';' cannot be matched; rename the test)\n");
        return 1;
    }
    return rc;
}
