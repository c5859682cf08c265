// mumoe-plot-sweep RESULTS.json OUT.png: the expert-count experiment's chart — mean expert
// polysemanticity (Eq. 4) against the number of experts N (log scale), one line per gate
// activation — drawn with OpenCV from scripts/sweep_table.py's results.json.
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace {

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(digits);
  s << v;
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: mumoe-plot-sweep RESULTS.json OUT.png\n";
    return 1;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "mumoe-plot-sweep: " << argv[1] << ": cannot be read\n";
    return 2;
  }
  const auto rows = nlohmann::json::parse(in);
  std::map<std::string, std::vector<std::pair<double, double>>> series;
  double lo = 1e9, hi = -1e9, nmin = 1e9, nmax = 0;
  for (const auto& r : rows) {
    if (r["mean_polysemanticity"].is_null()) continue;
    const double n = r["experts"], p = r["mean_polysemanticity"];
    series[r["activation"]].push_back({n, p});
    lo = std::min(lo, p), hi = std::max(hi, p), nmin = std::min(nmin, n), nmax = std::max(nmax, n);
  }
  if (series.empty()) {
    std::cerr << "mumoe-plot-sweep: no rows with a polysemanticity\n";
    return 2;
  }
  const double pad = std::max(0.01, (hi - lo) * 0.1);
  lo -= pad, hi += pad;
  const int W = 720, H = 440, left = 80, right = 30, top = 50, bottom = 60;
  cv::Mat img(H, W, CV_8UC3, cv::Scalar(255, 255, 255));
  auto x_of = [&](double n) {
    return left + static_cast<int>((std::log2(n) - std::log2(nmin)) / (std::log2(nmax) - std::log2(nmin)) *
                                   (W - left - right));
  };
  auto y_of = [&](double p) { return top + static_cast<int>((hi - p) / (hi - lo) * (H - top - bottom)); };
  const cv::Scalar axis(60, 60, 60), grid(225, 225, 225);
  for (int k = 0; k <= 5; ++k) {
    const double p = lo + (hi - lo) * k / 5;
    cv::line(img, {left, y_of(p)}, {W - right, y_of(p)}, grid);
    cv::putText(img, fixed(p, 3), {8, y_of(p) + 4}, cv::FONT_HERSHEY_SIMPLEX, 0.4, axis, 1, cv::LINE_AA);
  }
  for (double n = nmin; n <= nmax; n *= 2) {
    cv::line(img, {x_of(n), top}, {x_of(n), H - bottom}, grid);
    cv::putText(img, std::to_string(static_cast<int>(n)), {x_of(n) - 12, H - bottom + 18}, cv::FONT_HERSHEY_SIMPLEX,
                0.45, axis, 1, cv::LINE_AA);
  }
  cv::rectangle(img, {left, top}, {W - right, H - bottom}, axis);
  cv::putText(img, "number of experts N (log scale)", {W / 2 - 120, H - 18}, cv::FONT_HERSHEY_SIMPLEX, 0.5, axis, 1,
              cv::LINE_AA);
  cv::putText(img, "Mean expert polysemanticity (Eq. 4, lower = more specialised), Fashion-MNIST test",
              {left - 60, 28}, cv::FONT_HERSHEY_SIMPLEX, 0.5, axis, 1, cv::LINE_AA);
  const std::vector<cv::Scalar> colours = {cv::Scalar(180, 100, 30), cv::Scalar(40, 120, 230)};
  int k = 0;
  for (const auto& [name, points] : series) {
    const auto colour = colours[k % colours.size()];
    for (size_t i = 0; i < points.size(); ++i) {
      const cv::Point p(x_of(points[i].first), y_of(points[i].second));
      cv::circle(img, p, 4, colour, cv::FILLED, cv::LINE_AA);
      if (i) cv::line(img, {x_of(points[i - 1].first), y_of(points[i - 1].second)}, p, colour, 2, cv::LINE_AA);
    }
    cv::line(img, {W - right - 150, top + 20 + 20 * k}, {W - right - 120, top + 20 + 20 * k}, colour, 2, cv::LINE_AA);
    cv::putText(img, name, {W - right - 112, top + 25 + 20 * k}, cv::FONT_HERSHEY_SIMPLEX, 0.5, axis, 1, cv::LINE_AA);
    ++k;
  }
  if (!cv::imwrite(argv[2], img)) {
    std::cerr << "mumoe-plot-sweep: " << argv[2] << ": cannot be written\n";
    return 2;
  }
  return 0;
}
