#pragma once
// A dependency-free line plot written as PNG (stored, uncompressed deflate
// blocks; CRC-32 and Adler-32 computed here), so the examples leave a
// picture on any machine without Python or an image library.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kloss_examples {

struct Series {
  std::string label;
  std::vector<double> x, y;
  std::array<std::uint8_t, 3> rgb;
};

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(static_cast<std::size_t>(w) * h * 3, 255) {}
  void set(int x, int y, std::array<std::uint8_t, 3> c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    auto* p = &px_[(static_cast<std::size_t>(y) * w_ + x) * 3];
    p[0] = c[0];
    p[1] = c[1];
    p[2] = c[2];
  }
  void line(double x0, double y0, double x1, double y1, std::array<std::uint8_t, 3> c, int thick = 1) {
    const int n = static_cast<int>(std::max(std::fabs(x1 - x0), std::fabs(y1 - y0))) + 1;
    for (int i = 0; i <= n; ++i) {
      const double t = n ? static_cast<double>(i) / n : 0;
      const int x = static_cast<int>(std::lround(x0 + t * (x1 - x0)));
      const int y = static_cast<int>(std::lround(y0 + t * (y1 - y0)));
      for (int dx = -(thick / 2); dx <= thick / 2; ++dx)
        for (int dy = -(thick / 2); dy <= thick / 2; ++dy) set(x + dx, y + dy, c);
    }
  }
  void write_png(const std::string& path) const {
    std::vector<std::uint8_t> raw;
    raw.reserve(px_.size() + h_);
    for (int y = 0; y < h_; ++y) {
      raw.push_back(0);  // filter: none
      raw.insert(raw.end(), px_.begin() + static_cast<std::ptrdiff_t>(y) * w_ * 3,
                 px_.begin() + static_cast<std::ptrdiff_t>(y + 1) * w_ * 3);
    }
    std::vector<std::uint8_t> z = {0x78, 0x01};
    for (std::size_t off = 0; off < raw.size() || off == 0;) {
      const std::size_t len = std::min<std::size_t>(65535, raw.size() - off);
      const bool last = off + len >= raw.size();
      z.push_back(last ? 1 : 0);
      z.push_back(len & 0xff);
      z.push_back((len >> 8) & 0xff);
      z.push_back(~len & 0xff);
      z.push_back((~len >> 8) & 0xff);
      z.insert(z.end(), raw.begin() + off, raw.begin() + off + len);
      off += len;
      if (last) break;
    }
    std::uint32_t a = 1, b = 0;
    for (auto v : raw) {
      a = (a + v) % 65521;
      b = (b + a) % 65521;
    }
    put32(z, (b << 16) | a);
    std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    std::vector<std::uint8_t> ihdr;
    put32(ihdr, w_);
    put32(ihdr, h_);
    ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
    chunk(png, "IHDR", ihdr);
    chunk(png, "IDAT", z);
    chunk(png, "IEND", {});
    std::ofstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot write " + path);
    f.write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  }

 private:
  static void put32(std::vector<std::uint8_t>& v, std::uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back((x >> s) & 0xff);
  }
  static void chunk(std::vector<std::uint8_t>& png, const char* type, const std::vector<std::uint8_t>& data) {
    put32(png, static_cast<std::uint32_t>(data.size()));
    std::vector<std::uint8_t> td(type, type + 4);
    td.insert(td.end(), data.begin(), data.end());
    std::uint32_t crc = 0xffffffffu;
    for (auto byte : td) {
      crc ^= byte;
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    png.insert(png.end(), td.begin(), td.end());
    put32(png, crc ^ 0xffffffffu);
  }
  int w_, h_;
  std::vector<std::uint8_t> px_;
};

/// Plots the series (y on a log10 axis when `log_y`) with a frame and light
/// grid lines at each decade / tenth; labels are left to the CSV beside it.
inline void plot_png(const std::string& path, const std::vector<Series>& series, bool log_y) {
  const int W = 800, H = 500, L = 60, R = 20, T = 20, B = 40;
  Canvas c(W, H);
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  auto fy = [&](double y) { return log_y ? std::log10(std::max(y, 1e-30)) : y; };
  for (const auto& s : series)
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, fy(s.y[i]));
      y1 = std::max(y1, fy(s.y[i]));
    }
  if (!(x1 > x0)) x1 = x0 + 1;
  if (!(y1 > y0)) y1 = y0 + 1;
  if (log_y) {
    y0 = std::floor(y0);
    y1 = std::ceil(y1);
  }
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (fy(y) - y0) / (y1 - y0) * (H - T - B); };
  const std::array<std::uint8_t, 3> grid = {225, 225, 225}, axis = {0, 0, 0};
  const int ny = log_y ? static_cast<int>(y1 - y0) : 10;
  for (int i = 0; i <= ny; ++i) {
    const double yy = H - B - static_cast<double>(i) / ny * (H - T - B);
    c.line(L, yy, W - R, yy, grid);
  }
  c.line(L, H - B, W - R, H - B, axis);
  c.line(L, T, L, H - B, axis);
  for (const auto& s : series)
    for (std::size_t i = 1; i < s.x.size(); ++i)
      if (std::isfinite(s.y[i - 1]) && std::isfinite(s.y[i]))
        c.line(px(s.x[i - 1]), py(s.y[i - 1]), px(s.x[i]), py(s.y[i]), s.rgb, 2);
  c.write_png(path);
}

}  // namespace kloss_examples
