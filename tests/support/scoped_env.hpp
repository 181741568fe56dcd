#pragma once
// Unsets a list of environment variables for one test and restores their values afterwards, so
// that variables of the shell (or of a launcher the suite runs under) cannot leak into it.
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gossamer::test {

class ScopedEnv {
  public:
    explicit ScopedEnv(std::initializer_list<const char*> names) {
        for (const char* v : names) {
            const char* value = std::getenv(v);
            saved_.emplace_back(v, value ? std::optional<std::string>(value) : std::nullopt);
            unsetenv(v);
        }
    }
    ~ScopedEnv() {
        for (const auto& [name, value] : saved_) {
            if (value)
                setenv(name.c_str(), value->c_str(), 1);
            else
                unsetenv(name.c_str());
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
    void set(const char* name, const char* value) { setenv(name, value, 1); }

  private:
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace gossamer::test
