// Colour-range control of a heatmap: a small histogram of the displayed values (in the
// scale's display space) with the current range marked, min / max entries and an "auto" box.
#pragma once

#include <QWidget>
#include <vector>

#include "app/plot/Colormaps.h"

class QCheckBox;
class QCustomPlot;
class QCPBars;
class QCPItemStraightLine;
class QLineEdit;

namespace attnscope {

class ScaleTicker;

class RangeHistogram : public QWidget {
  Q_OBJECT

 public:
  explicit RangeHistogram(QWidget* parent = nullptr);

  // Histogram of display-space values; the x axis is labelled in data units of `scale`.
  void setValues(const std::vector<double>& display, ScaleKind scale, double linthresh);
  // Shows [lo, hi] (data units) in the entries and as lines; `automatic` ticks the box.
  void setRange(double lo, double hi, bool automatic);

  bool automatic() const;
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  int binCount() const { return static_cast<int>(counts_.size()); }
  const std::vector<double>& counts() const { return counts_; }

 signals:
  // The user typed a range (auto switches off) or toggled auto.
  void rangeEdited(double lo, double hi);
  void automaticToggled(bool automatic);

 private:
  void commitEdits();
  void placeLines();

  QCustomPlot* plot_ = nullptr;
  QCPBars* bars_ = nullptr;
  QCPItemStraightLine* loLine_ = nullptr;
  QCPItemStraightLine* hiLine_ = nullptr;
  QSharedPointer<ScaleTicker> ticker_;
  QLineEdit* loEdit_ = nullptr;
  QLineEdit* hiEdit_ = nullptr;
  QCheckBox* auto_ = nullptr;
  std::vector<double> counts_;
  ScaleKind scale_ = ScaleKind::linear;
  double linthresh_ = 1.0;
  double lo_ = 0, hi_ = 1;
};

}  // namespace attnscope
