#include "svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace gossamer::launch::svg {
namespace {

constexpr const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                    "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
constexpr double kW = 560, kH = 320, kL = 64, kR = 16, kT = 28, kB = 44;

const char* colour(std::size_t i) {
    return kColours[i % (sizeof(kColours) / sizeof(kColours[0]))];
}

std::string num(double v) {
    if (v == 0) return "0";
    const double a = std::abs(v);
    if (a >= 1e4 || a < 1e-2) return fmt::format("{:.2g}", v);
    return fmt::format("{:.3g}", v);
}

std::string open(const std::string& title, double w = kW, double h = kH) {
    return fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 "
        "{0} {1}\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\"><title>{2}</title>"
        "<text x=\"{3}\" y=\"16\" font-size=\"13\" font-weight=\"bold\">{2}</text>",
        w, h, escape(title), kL);
}

// Axes, ticks and labels over [x0, x1] x [y0, y1].
std::string axes(double x0, double x1, double y0, double y1, const std::string& xl,
                 const std::string& yl) {
    std::string s = fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>", kL,
        kT, kW - kL - kR, kH - kT - kB);
    for (int i = 0; i <= 4; ++i) {
        const double fx = kL + (kW - kL - kR) * i / 4.0, fy = kH - kB - (kH - kT - kB) * i / 4.0;
        s += fmt::format(
            "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"{}\" "
            "y=\"{:.1f}\" text-anchor=\"end\">{}</text><line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" "
            "y2=\"{:.1f}\" stroke=\"#eee\"/>",
            fx, kH - kB + 14, num(x0 + (x1 - x0) * i / 4.0), kL - 4, fy + 4,
            num(y0 + (y1 - y0) * i / 4.0), kL + 1, kW - kR - 1, fy, fy);
    }
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text><text transform=\"translate(14 "
        "{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        (kL + kW - kR) / 2, kH - 8, escape(xl), (kT + kH - kB) / 2, escape(yl));
    return s;
}

}  // namespace

std::string escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '&':
                out += "&amp;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

std::string line_chart(const std::string& title, const std::string& x_label,
                       const std::string& y_label, const std::vector<Series>& series) {
    double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
    for (const auto& s : series)
        for (const auto& [x, y] : s.points) {
            if (!std::isfinite(x) || !std::isfinite(y)) continue;
            x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
        }
    std::string out = open(title);
    if (!(x1 >= x0)) return out + "<text x=\"200\" y=\"160\">no data</text></svg>";
    if (x1 == x0) x1 = x0 + 1;
    if (y1 == y0) y1 = y0 + 1;
    y0 = std::min(y0, 0.0);
    out += axes(x0, x1, y0, y1, x_label, y_label);
    const auto px = [&](double x) { return kL + (x - x0) / (x1 - x0) * (kW - kL - kR); };
    const auto py = [&](double y) { return kH - kB - (y - y0) / (y1 - y0) * (kH - kT - kB); };
    for (std::size_t i = 0; i < series.size(); ++i) {
        std::string pts;
        for (const auto& [x, y] : series[i].points)
            if (std::isfinite(x) && std::isfinite(y))
                pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
        out += fmt::format(
            "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\" "
            "points=\"{}\"><title>{}</title></polyline><text x=\"{}\" y=\"{}\" fill=\"{}\">{}"
            "</text>",
            colour(i), pts, escape(series[i].name), kW - kR - 110, kT + 14 + 14 * i, colour(i),
            escape(series[i].name));
    }
    return out + "</svg>";
}

std::string bar_chart(const std::string& title, const std::string& y_label,
                      const std::vector<std::string>& groups,
                      const std::vector<std::vector<double>>& values) {
    std::size_t cats = 0;
    double top = 0;
    for (const auto& g : values) {
        cats = std::max(cats, g.size());
        for (double v : g) top = std::max(top, v);
    }
    std::string out = open(title);
    if (cats == 0) return out + "<text x=\"200\" y=\"160\">no data</text></svg>";
    if (top <= 0) top = 1;
    out += axes(-0.5, static_cast<double>(cats) - 0.5, 0, top, "peer", y_label);
    const double slot = (kW - kL - kR) / static_cast<double>(cats);
    const double bar = slot * 0.8 / static_cast<double>(std::max<std::size_t>(1, values.size()));
    for (std::size_t g = 0; g < values.size(); ++g) {
        for (std::size_t i = 0; i < values[g].size(); ++i) {
            const double h = values[g][i] / top * (kH - kT - kB);
            out += fmt::format(
                "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                "fill=\"{}\"><title>{} peer {}: {}</title></rect>",
                kL + slot * static_cast<double>(i) + slot * 0.1 + bar * static_cast<double>(g),
                kH - kB - h, bar, h, colour(g), escape(groups[g]), i, num(values[g][i]));
        }
        out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>", kW - kR - 110,
                           kT + 14 + 14 * g, colour(g), escape(groups[g]));
    }
    return out + "</svg>";
}

std::string heatmap(const std::string& title, const std::string& unit,
                    const std::vector<std::vector<double>>& m) {
    const std::size_t n = m.size();
    const double cell = n > 0 ? std::clamp(360.0 / static_cast<double>(n), 2.0, 36.0) : 10;
    const double size = cell * static_cast<double>(n);
    std::string out = open(title, std::max(kW, size + 140), size + 70);
    double top = 0;
    for (const auto& row : m)
        for (double v : row)
            if (!std::isnan(v)) top = std::max(top, v);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m[i].size(); ++j) {
            if (std::isnan(m[i][j])) {
                out += fmt::format(
                    "<rect class=\"cell none\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                    "height=\"{:.1f}\" fill=\"#eee\" stroke=\"#fff\" stroke-width=\"0.5\">"
                    "<title>{} to {}: no edge</title></rect>",
                    60 + cell * static_cast<double>(j), 40 + cell * static_cast<double>(i), cell,
                    cell, i, j);
                continue;
            }
            const double f = top > 0 ? m[i][j] / top : 0;
            const int shade = static_cast<int>(255 - 200 * f);
            out += fmt::format(
                "<rect class=\"cell\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                "height=\"{:.1f}\" fill=\"rgb({},{},255)\" stroke=\"#fff\" stroke-width=\"0.5\">"
                "<title>{} to {}: {} {}</title></rect>",
                60 + cell * static_cast<double>(j), 40 + cell * static_cast<double>(i), cell, cell,
                shade, shade, i, j, num(m[i][j]), escape(unit));
        }
    out += fmt::format(
        "<text x=\"60\" y=\"34\">receiver (columns) 0..{}; sender (rows); darker: more {}; max "
        "{}</text>",
        n == 0 ? 0 : n - 1, escape(unit), num(top));
    return out + "</svg>";
}

std::string graph(const std::string& title, int n, const std::vector<std::pair<int, int>>& edges) {
    const double r = 130, cx = kW / 2, cy = 180;
    std::string out = open(title, kW, 360);
    const auto at = [&](int i) {
        const double a = 2 * M_PI * i / std::max(1, n) - M_PI / 2;
        return std::pair{cx + r * std::cos(a), cy + r * std::sin(a)};
    };
    std::set<std::pair<int, int>> set(edges.begin(), edges.end());
    out +=
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"18\" refY=\"5\" "
        "markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" "
        "fill=\"#666\"/></marker></defs>";
    for (const auto& [a, b] : set) {
        const bool both = set.contains({b, a});
        if (both && b < a) continue;  // drawn once, as a line
        const auto [x1, y1] = at(a);
        const auto [x2, y2] = at(b);
        out += fmt::format(
            "<line class=\"edge\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
            "stroke=\"#666\"{}/>",
            x1, y1, x2, y2, both ? "" : " marker-end=\"url(#arrow)\"");
    }
    if (n <= 64)
        for (int i = 0; i < n; ++i) {
            const auto [x, y] = at(i);
            out += fmt::format(
                "<circle class=\"node\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"10\" fill=\"#fff\" "
                "stroke=\"#1f77b4\"/><text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}"
                "</text>",
                x, y, x, y + 4, i);
        }
    return out + "</svg>";
}

std::string timeline(const std::string& title, const std::vector<std::vector<Span>>& lanes) {
    constexpr double kWidth = 1100, kRow = 12, kLeft = 48, kTop = 28, kBottom = 34;
    double end = 0;
    for (const auto& lane : lanes)
        for (const auto& s : lane) end = std::max(end, s.end);
    const double h = kTop + kRow * static_cast<double>(lanes.size()) + kBottom;
    std::string out = open(title, kWidth, h);
    if (end <= 0) return out + "<text x=\"20\" y=\"50\">no data</text></svg>\n";
    const double plot = kWidth - kLeft - 16;
    const auto x = [&](double t) { return kLeft + plot * t / end; };
    constexpr const char* kFill[] = {"#1f77b4", "#ff7f0e"};
    for (std::size_t r = 0; r < lanes.size(); ++r) {
        const double y = kTop + kRow * static_cast<double>(r);
        out += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"9\" text-anchor=\"end\">{}</text>",
            kLeft - 4, y + kRow - 3, r);
        for (const auto& s : lanes[r]) {
            const double w = std::max(0.5, x(s.end) - x(s.start));
            out += fmt::format(
                "<rect class=\"span\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" "
                "height=\"{:.1f}\" fill=\"{}\"><title>{}</title></rect>",
                x(s.start), y + 1, w, kRow - 2, kFill[s.kind == 0 ? 0 : 1], escape(s.label));
        }
    }
    const double axis = kTop + kRow * static_cast<double>(lanes.size()) + 4;
    for (int k = 0; k <= 4; ++k) {
        const double t = end * k / 4;
        out += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\">{} "
            "s</text>",
            x(t), axis + 12, num(t));
    }
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\"><tspan fill=\"{}\">&#9632; "
        "step</tspan> <tspan fill=\"{}\">&#9632; wait</tspan> (row: peer)</text>",
        kLeft, axis + 26, kFill[0], kFill[1]);
    return out + "</svg>\n";
}

}  // namespace gossamer::launch::svg
