#pragma once
/// Progress lines on stderr for long commands. On a terminal one line is rewritten in place at
/// most every 0.2 s; otherwise a full line is printed at most every `plain_interval` seconds (and
/// whenever `force` is set), so logs of unattended runs still show that work goes on. A
/// `plain_interval` of 0 prints nothing when stderr is not a terminal (for short commands).

#include <chrono>
#include <string>
#include <string_view>

namespace gossamer {

class Progress {
  public:
    explicit Progress(double plain_interval = 30.0);
    ~Progress() { done(); }
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    /// Shows `line` (prefixed with the elapsed time) if enough time passed since the last one.
    void operator()(std::string_view line, bool force = false);
    /// Clears the progress line before results are printed.
    void done();
    /// Seconds since construction.
    double elapsed() const;

  private:
    bool tty_;
    bool printed_ = false;
    double plain_interval_;
    double last_ = 0;  // the first plain line comes after plain_interval; a terminal's at once
    std::chrono::steady_clock::time_point start_;
};

/// "1h02m", "3m07s", "12s": durations for ETAs.
std::string format_duration(double seconds);

}  // namespace gossamer
