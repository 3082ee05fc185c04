// The least-squares line y = intercept + slope x through weighted points: the benchmarks fit a
// call's time against its work (experts computed) to split it into a fixed cost and a rate.
#pragma once

namespace ft::cli {

struct LineFit {
  double n = 0, x = 0, y = 0, xx = 0, xy = 0;  // sums, weighted

  void add(double px, double py, double weight = 1) {
    n += weight;
    x += weight * px;
    y += weight * py;
    xx += weight * px * px;
    xy += weight * px * py;
  }
  // 0 while the points do not tell a slope (fewer than two distinct x).
  double slope() const {
    const double det = n * xx - x * x;
    return det > 0 ? (n * xy - x * y) / det : 0;
  }
  double intercept() const { return n > 0 ? (y - slope() * x) / n : 0; }
};

}  // namespace ft::cli
