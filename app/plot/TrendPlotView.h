// A quantity over training steps on a log y axis (the Health view's max |logit| of one head):
// the measured values, fitted curves drawn past the data (a trend and its band, dashed), a
// labelled limit line and labelled vertical step markers (first warning, predicted crossing).
#pragma once

#include <QColor>
#include <QString>
#include <QWidget>
#include <vector>

class QCustomPlot;

namespace attnscope {

struct TrendCurve {
  QString name;
  std::vector<double> steps, values;  // values <= 0 or non-finite leave a gap
  QColor color;
  bool dashed = false;
  bool points = false;  // a disc at each value (measured data)
};

struct StepMarker {
  QString label;
  double step = 0;
  QColor color;
};

class TrendPlotView : public QWidget {
  Q_OBJECT

 public:
  explicit TrendPlotView(QWidget* parent = nullptr);

  // Replaces the content; the y range covers the positive finite values and the limit.
  void setData(const QString& title, const std::vector<TrendCurve>& curves, double limit,
               const QString& limitLabel, const std::vector<StepMarker>& markers);
  void clear();
  int curveCount() const { return curves_; }
  QStringList markerLabels() const { return markerLabels_; }

  bool exportTo(const QString& path, QString* error);

 private:
  QCustomPlot* plot_ = nullptr;
  int curves_ = 0;
  QStringList markerLabels_;
};

}  // namespace attnscope
