// (batch x head) and (step x layer) metric heatmaps plus the timeline (see OverviewPanel.h).
#include "app/panels/OverviewPanel.h"

#include <QComboBox>
#include <QCursor>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QSplitter>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "app/export/SettingNames.h"
#include "app/gui/AnalysisController.h"
#include "app/gui/SessionContext.h"
#include "app/plot/AnnotationLayer.h"
#include "app/plot/HeatmapView.h"
#include "app/plot/RowPlotView.h"
#include "core/view/head_grids.h"

namespace attnscope {
namespace {

const QColor kLineColors[] = {QColor(0x1f, 0x77, 0xb4), QColor(0xd6, 0x27, 0x28),
                              QColor(0x2c, 0xa0, 0x2c), QColor(0x94, 0x67, 0xbd),
                              QColor(0xff, 0x7f, 0x0e), QColor(0x8c, 0x56, 0x4b),
                              QColor(0xe3, 0x77, 0xc2), QColor(0x17, 0xbe, 0xcf)};

// A filled red box over cell (row, col) of the (step x layer) map: that case failed.
Annotation errorMarker(int row, int col) {
  Annotation a;
  a.kind = AnnotationKind::box;
  a.view = QStringLiteral("step x layer");
  a.from = QPointF(col - 0.45, row - 0.45);
  a.to = QPointF(col + 0.45, row + 0.45);
  a.text = QStringLiteral("error");
  a.automatic = true;
  a.fill = QColor(0xd0, 0x20, 0x20, 0xc0);
  return a;
}

// An outline around the rows of one rank of a run folder.
Annotation rankBlock(int firstRow, int rows, int layers) {
  Annotation a;
  a.kind = AnnotationKind::box;
  a.view = QStringLiteral("step x layer");
  a.from = QPointF(-0.5, firstRow - 0.5);
  a.to = QPointF(layers - 0.5, firstRow + rows - 0.5);
  a.automatic = true;
  return a;
}

int indexOf(const std::vector<int64_t>& v, int64_t x) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == x) return static_cast<int>(i);
  }
  return -1;
}

// The row of a case in the (step x layer) map: its step, under its rank's block for a run.
int seriesRow(const SeriesResult& s, const SeriesCase& c) {
  const int step = indexOf(s.steps, c.step);
  if (s.ranks.empty()) return step;
  return indexOf(s.ranks, c.rank) * static_cast<int>(s.steps.size()) + step;
}

}  // namespace

OverviewPanel::OverviewPanel(SessionContext* context, AnalysisController* analysis, QWidget* parent)
    : QWidget(parent), context_(context), analysis_(analysis) {
  metricBox_ = new QComboBox(this);
  metricBox_->setObjectName(QStringLiteral("metricBox"));
  for (Metric m : kAllMetrics) {
    metricBox_->addItem(QString::fromLatin1(metric_name(m)), static_cast<int>(m));
  }
  headMap_ = new HeatmapView(tr("batch x head"), ColormapKind::sequential,
                             {tr("batch"), tr("head")}, this);
  headMap_->setObjectName(QStringLiteral("overviewHeads"));
  headMap_->setIndexMap();
  seriesMap_ = new HeatmapView(tr("step x layer"), ColormapKind::sequential,
                               {tr("step"), tr("layer")}, this);
  seriesMap_->setObjectName(QStringLiteral("overviewSeries"));
  seriesMap_->setIndexMap();
  timeline_ = new RowPlotView(this);
  timeline_->setXAxis(tr("training step"), {}, false);
  seriesNote_ = new QLabel(this);
  seriesNote_->setWordWrap(true);
  progress_ = new QProgressBar(this);
  progress_->setObjectName(QStringLiteral("scanProgress"));
  progress_->setFormat(tr("%v / %m cases"));
  progress_->setVisible(false);
  cancel_ = new QToolButton(this);
  cancel_->setObjectName(QStringLiteral("scanCancel"));
  cancel_->setText(tr("Cancel"));
  cancel_->setToolTip(tr("Stop the case analyses (Esc)"));
  cancel_->setShortcut(QKeySequence(Qt::Key_Escape));  // active only while shown
  cancel_->setVisible(false);
  rescan_ = new QToolButton(this);
  rescan_->setObjectName(QStringLiteral("scanRescan"));
  rescan_->setText(tr("Rescan"));
  rescan_->setVisible(false);

  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("metric"), this));
  top->addWidget(metricBox_, 1);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(headMap_);
  split->addWidget(seriesMap_);
  split->addWidget(timeline_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* scan = new QHBoxLayout;
  scan->addWidget(progress_, 1);
  scan->addWidget(cancel_);
  scan->addWidget(rescan_);
  layout->addLayout(top);
  layout->addLayout(scan);
  layout->addWidget(seriesNote_);
  layout->addWidget(split, 1);

  connect(metricBox_, &QComboBox::activated, this, [this](int index) {
    setMetric(static_cast<Metric>(metricBox_->itemData(index).toInt()));
  });
  connect(headMap_, &HeatmapView::cellClicked, this, [this](const CellReadout& r) {
    context_->setBatch(r.row);
    context_->setHead(r.col);
  });
  connect(seriesMap_, &HeatmapView::cellClicked, this,
          [this](const CellReadout& r) { onSeriesClicked(r.row, r.col); });
  connect(seriesMap_, &HeatmapView::cellHovered, this, [this](const CellReadout& r) {
    const QString error = seriesError(r.row, r.col);
    seriesMap_->setToolTip(error);
    if (!error.isEmpty()) QToolTip::showText(QCursor::pos(), error, seriesMap_);
  });
  connect(analysis_, &AnalysisController::busyChanged, this, &OverviewPanel::onBusyChanged);
  connect(analysis_, &AnalysisController::seriesProgress, this, [this](int done, int total) {
    progress_->setRange(0, total);
    progress_->setValue(done);
    progress_->setVisible(analysis_->busy());
  });
  connect(cancel_, &QToolButton::clicked, analysis_, &AnalysisController::cancelAll);
  connect(analysis_, &AnalysisController::cancelled, this, [this] {
    const QString done =
        progress_->value() < 0
            ? QString()
            : tr(" after %1 of %2 cases").arg(progress_->value()).arg(progress_->maximum());
    seriesNote_->setText(tr("case analyses cancelled%1; Rescan starts them again").arg(done));
    progress_->reset();
    rescan_->setVisible(true);
  });
  connect(rescan_, &QToolButton::clicked, analysis_, &AnalysisController::rescan);
  connect(analysis_, &AnalysisController::summaryChanged, this, &OverviewPanel::showHeads);
  connect(analysis_, &AnalysisController::seriesChanged, this, &OverviewPanel::showSeries);
  connect(context_, &SessionContext::headChanged, this, &OverviewPanel::showHeads);
  connect(context_, &SessionContext::caseChanged, this, &OverviewPanel::showSeries);
  showHeads();
  showSeries();
}

void OverviewPanel::setMetric(Metric metric) {
  metric_ = metric;
  metricBox_->setCurrentIndex(metricBox_->findData(static_cast<int>(metric)));
  showHeads();
  showSeries();
}

void OverviewPanel::showHeads() {
  const auto s = analysis_->summary();
  if (!s || s->case_path != context_->casePath().toStdString() || s->metrics.heads == 0) {
    headMap_->clear();
    headMap_->setHighlight(std::nullopt);
    return;
  }
  const HeadMetrics& m = s->metrics;
  const std::vector<double>& v = m.values[static_cast<int>(metric_)];
  auto grid = std::make_shared<MatrixGrid>(
      dense_grid("batch x head", std::vector<float>(v.begin(), v.end()), m.batch, m.heads));
  headMap_->setGrid(grid, true);
  headMap_->setStamp(QStringLiteral("%1 · %2 %3")
                         .arg(QString::fromLatin1(metric_name(metric_)),
                              QString::fromLatin1(precision_name(s->precision)),
                              modeName(s->mode)));
  const int64_t b = context_->batch(), h = context_->head();
  headMap_->setHighlight(MatrixWindow{b, b + 1, h, h + 1});
}

void OverviewPanel::showSeries() {
  const auto s = analysis_->series();
  AnnotationLayer* markerLayer = AnnotationLayer::of(seriesMap_);
  seriesErrors_.clear();
  if (!s || s->cases.empty()) {
    seriesMap_->clear();
    markerLayer->setAnnotations({});
    timeline_->clear();
    seriesNote_->setText(tr("(step x layer) overview: the file has no cases with step attributes"));
    return;
  }
  const int steps = static_cast<int>(s->steps.size()), layers = static_cast<int>(s->layers.size());
  const int rows = steps * std::max<int>(1, static_cast<int>(s->ranks.size()));
  std::vector<float> cells(static_cast<size_t>(rows * layers), std::nanf(""));
  std::vector<bool> shown(cells.size(), false);  // a finished case's value (else grey)
  std::vector<RowSeries> lines(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    lines[static_cast<size_t>(l)] = {tr("layer %1").arg(s->layers[static_cast<size_t>(l)]),
                                     std::vector<float>(static_cast<size_t>(steps), std::nanf("")),
                                     kLineColors[l % 8]};
  }
  std::optional<MatrixWindow> current;
  QList<Annotation> markers;       // rank blocks and error cells
  QMap<double, QString> rankRows;  // "rank N" at the first row of its block
  for (size_t k = 0; k < s->ranks.size(); ++k) {
    markers << rankBlock(static_cast<int>(k) * steps, steps, layers);
    rankRows[static_cast<double>(k) * steps] = tr("rank %1").arg(s->ranks[k]);
  }
  for (const SeriesCase& c : s->cases) {
    const int r = seriesRow(*s, c), col = indexOf(s->layers, c.layer);
    const size_t cell = static_cast<size_t>(r * layers + col);
    // The timeline follows the selected file (one rank of a run).
    const bool timeline = c.file == context_->fileIndex();
    if (c.state == SeriesState::done) {
      const auto value = static_cast<float>(c.metrics[static_cast<int>(metric_)]);
      cells[cell] = value;
      shown[cell] = true;
      if (timeline) {
        lines[static_cast<size_t>(col)].values[static_cast<size_t>(indexOf(s->steps, c.step))] =
            value;
      }
    } else if (c.state == SeriesState::error) {
      seriesErrors_[{r, col}] = QString::fromStdString(c.path + ": " + c.error);
      markers << errorMarker(r, col);
    }
    if (timeline && QString::fromStdString(c.path) == context_->casePath()) {
      current = MatrixWindow{r, r + 1, col, col + 1};
    }
  }
  MatrixGrid grid = dense_grid("step x layer", std::move(cells), rows, layers);
  for (size_t e = 0; e < shown.size(); ++e) {  // pending and error cells: grey, not NaN
    if (shown[e]) continue;
    grid.counts.nan -= grid.cls[e] == CellClass::nan;
    grid.cls[e] = CellClass::masked;
    ++grid.counts.masked;
  }
  seriesMap_->setGrid(std::make_shared<MatrixGrid>(std::move(grid)), true);
  seriesMap_->setRowAxis(rankRows.isEmpty() ? tr("step") : tr("steps of each rank"), rankRows);
  seriesMap_->setStamp(QString::fromLatin1(metric_name(metric_)));
  seriesMap_->setHighlight(current);
  markerLayer->setAnnotations(markers);
  std::vector<double> x(s->steps.begin(), s->steps.end());
  timeline_->setXAxis(tr("training step"), x, false);
  timeline_->setData(tr("%1 per training step").arg(QString::fromLatin1(metric_name(metric_))),
                     lines, {});
  const int total = static_cast<int>(s->cases.size());
  QString note = s->ranks.empty()
                     ? tr("%1 cases over %2 steps x %3 layers · rows: steps, columns: layers")
                           .arg(total)
                           .arg(steps)
                           .arg(layers)
                     : tr("%1 cases of %2 ranks x %3 steps x %4 layers · rows: steps of each rank "
                          "(outlined), columns: layers; timeline: the selected rank")
                           .arg(total)
                           .arg(s->ranks.size())
                           .arg(steps)
                           .arg(layers);
  if (s->done < total) note += tr(" · %1 of %2 analysed (grey: not yet)").arg(s->done).arg(total);
  if (!seriesErrors_.isEmpty()) {
    note += tr(" · %n case(s) could not be analysed (red, hover for why)", "",
               static_cast<int>(seriesErrors_.size()));
  }
  seriesNote_->setText(note);
}

QString OverviewPanel::seriesError(int64_t row, int64_t col) const {
  return seriesErrors_.value({row, col});
}

void OverviewPanel::onBusyChanged(bool busy) {
  cancel_->setVisible(busy);
  if (busy) rescan_->setVisible(false);
  if (!busy) progress_->setVisible(false);
}

void OverviewPanel::onSeriesClicked(int64_t row, int64_t col) {
  const auto s = analysis_->series();
  if (!s || row < 0 || col < 0) return;
  for (const SeriesCase& c : s->cases) {
    if (seriesRow(*s, c) == row && indexOf(s->layers, c.layer) == col) {
      context_->selectCase(c.file, QString::fromStdString(c.path));
      return;
    }
  }
}

}  // namespace attnscope
