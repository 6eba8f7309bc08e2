// Line plot of per-row series along the query sequence (m, LSE, l, row norms) with labelled
// horizontal threshold lines (fp16 max, the exp range -88.7) and markers at non-finite rows;
// also used with other x axes (training steps, log-spaced softmax scales). Items it does not
// draw itself (an AnnotationLayer's) survive setData.
#pragma once

#include <QColor>
#include <QString>
#include <QWidget>
#include <vector>

class QCPAbstractItem;
class QCustomPlot;

namespace attnscope {

struct RowSeries {
  QString name;
  std::vector<float> values;  // one per query row; non-finite values leave a gap + a marker
  QColor color;
};

struct Threshold {
  QString label;
  double value = 0;
  QColor color;
};

class RowPlotView : public QWidget {
  Q_OBJECT

 public:
  explicit RowPlotView(QWidget* parent = nullptr);

  // The x axis: its label, the x position of each index (empty: the index itself) and a log
  // scale (for scale sweeps). Applies to the next setData.
  void setXAxis(const QString& label, const std::vector<double>& positions, bool logScale);

  // Replaces the plot's content. Thresholds inside the data's range (or near it) are drawn;
  // the y range always covers the finite data.
  void setData(const QString& title, const std::vector<RowSeries>& series,
               const std::vector<Threshold>& thresholds);
  void clear();

  int seriesCount() const { return static_cast<int>(series_.size()); }
  // Labels of the threshold lines currently drawn.
  QStringList drawnThresholds() const { return drawn_; }
  // Rows marked non-finite, over all series.
  int64_t nonfiniteMarkers() const { return nonfinite_; }

  bool exportTo(const QString& path, QString* error);

 signals:
  void rowHovered(int64_t row);

 private:
  QCustomPlot* plot_ = nullptr;
  std::vector<RowSeries> series_;
  std::vector<double> xPositions_;
  QList<QCPAbstractItem*> thresholdItems_;  // lines and labels of the thresholds drawn
  QStringList drawn_;
  int64_t nonfinite_ = 0;
};

}  // namespace attnscope
