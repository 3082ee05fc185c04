#include "ft/engine/share_tuner.h"

#include <algorithm>

namespace ft::engine {

ShareTuner::ShareTuner(const Options& o)
    : o_(o), current_(std::clamp(o.start, 0.0, o.max_share)), reference_(current_), step_(o.step) {}

void ShareTuner::move_from_reference() {
  double next = std::clamp(reference_ + dir_ * step_, 0.0, o_.max_share);
  if (next == reference_) {  // at a bound: the other way
    dir_ = -dir_;
    next = std::clamp(reference_ + dir_ * step_, 0.0, o_.max_share);
  }
  current_ = next;
}

void ShareTuner::observe(int shape, double seconds) {
  if (shape != shape_) {
    shape_ = shape;
    count_ = 0;
    sum_ = 0;
    reference_time_ = -1;
    current_ = reference_;  // the reference is measured again at the new shape
    return;                 // this step may carry the change itself (first at a new context)
  }
  sum_ += seconds;
  if (++count_ < o_.window) return;
  const double mean = sum_ / count_;
  count_ = 0;
  sum_ = 0;
  if (current_ == reference_) {
    reference_time_ = mean;  // measured again each time it comes back: the optimum drifts
  } else if (reference_time_ >= 0 && mean < reference_time_ * (1 - o_.margin)) {
    reference_ = current_;  // the move paid: keep going that way
    reference_time_ = mean;
  } else {
    dir_ = -dir_;  // it did not: back, and try the other side with a smaller move
    step_ = std::max(o_.min_step, step_ / 2);
    current_ = reference_;
    return;
  }
  move_from_reference();
}

}  // namespace ft::engine
