// Health page: statistics map, warnings and the selected head's trend (see HealthPanel.h).
#include "app/panels/HealthPanel.h"

#include <QComboBox>
#include <QCursor>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QSplitter>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"
#include "app/plot/HeatmapView.h"
#include "app/plot/TrendPlotView.h"
#include "core/io/hdf5_dump.h"
#include "core/io/health_reader.h"
#include "core/view/head_grids.h"

namespace attnscope {
namespace {

struct MetricInfo {
  HealthMetric metric;
  const char* name;
  HealthStat stat;  // the statistic shown (headroom: derived from max_abs_logit)
};
const MetricInfo kMetrics[] = {
    {HealthMetric::headroom, "headroom: log10(limit / max |logit|)", HealthStat::max_abs_logit},
    {HealthMetric::max_abs_logit, "max |logit|", HealthStat::max_abs_logit},
    {HealthMetric::mean_entropy, "mean row entropy (nats)", HealthStat::mean_entropy},
    {HealthMetric::dominant_share, "rows with max P > 0.99", HealthStat::dominant_share},
    {HealthMetric::min_lse, "min LSE", HealthStat::min_lse},
    {HealthMetric::norm_dq, "||dQ||", HealthStat::norm_dq},
    {HealthMetric::norm_dk, "||dK||", HealthStat::norm_dk},
    {HealthMetric::norm_dv, "||dV||", HealthStat::norm_dv},
    {HealthMetric::norm_do, "||dO||", HealthStat::norm_do},
    {HealthMetric::nonfinite, "NaN / Inf values", HealthStat::nonfinite}};

const MetricInfo& infoOf(HealthMetric m) {
  for (const MetricInfo& info : kMetrics) {
    if (info.metric == m) return info;
  }
  return kMetrics[0];
}

double valueOf(const HealthSeries& s, size_t i, HealthMetric m) {
  return m == HealthMetric::headroom ? s.headroom(i) : s.at(i, infoOf(m).stat);
}

QString seriesName(const HealthSeries& s) {
  return QString::fromStdString(s.label());
}

}  // namespace

HealthPanel::HealthPanel(SessionContext* context, QWidget* parent)
    : QWidget(parent),
      context_(context),
      runner_(new TaskRunner(QStringLiteral("health"), TaskPriority::normal, this)) {
  metricBox_ = new QComboBox(this);
  metricBox_->setObjectName(QStringLiteral("healthMetric"));
  for (const MetricInfo& info : kMetrics) {
    metricBox_->addItem(tr(info.name), static_cast<int>(info.metric));
  }
  note_ = new QLabel(this);
  note_->setObjectName(QStringLiteral("healthNote"));
  note_->setWordWrap(true);
  note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  map_ = new HeatmapView(tr("step x (layer, head)"), ColormapKind::sequential,
                         {tr("step"), tr("layer, head")}, this);
  map_->setObjectName(QStringLiteral("healthMap"));
  map_->setIndexMap();
  warnings_ = new QListWidget(this);
  warnings_->setObjectName(QStringLiteral("healthWarnings"));
  warnings_->setWordWrap(true);
  trend_ = new TrendPlotView(this);
  trend_->setObjectName(QStringLiteral("healthTrend"));

  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("map"), this));
  top->addWidget(metricBox_, 1);
  auto* lower = new QSplitter(Qt::Horizontal, this);
  lower->addWidget(warnings_);
  lower->addWidget(trend_);
  lower->setStretchFactor(1, 2);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(map_);
  split->addWidget(lower);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(top);
  layout->addWidget(note_);
  layout->addWidget(split, 1);

  connect(metricBox_, &QComboBox::activated, this, [this](int index) {
    setMetric(static_cast<HealthMetric>(metricBox_->itemData(index).toInt()));
  });
  connect(map_, &HeatmapView::cellClicked, this, &HealthPanel::onCellClicked);
  // A double click opens the case of the warning's step (the crossing, the spike) if recorded.
  connect(warnings_, &QListWidget::itemDoubleClicked, this, [this] {
    const int row = warnings_->currentRow();
    if (!report_ || row < 0 || row >= static_cast<int>(report_->warnings.size())) return;
    const HealthWarning& w = report_->warnings[static_cast<size_t>(row)];
    openCase(w.step, report_->series[w.series].layer);
  });
  connect(warnings_, &QListWidget::currentRowChanged, this, [this](int row) {
    if (report_ && row >= 0 && row < static_cast<int>(report_->warnings.size())) {
      selectSeries(static_cast<int>(report_->warnings[static_cast<size_t>(row)].series));
    }
  });
  connect(runner_, &TaskRunner::failed, this, [this](const QString& message) {
    report_.reset();
    showReport();
    note_->setText(message);
  });
  const auto follow = [this] { showFile(context_->fileIndex()); };
  connect(context_, &SessionContext::caseChanged, this, follow);
  connect(context_, &SessionContext::casesAdded, this, [this](const QString& file) {
    if (file == path_) load(path_);  // a live recording grew: its statistics too
  });
  showReport();
}

void HealthPanel::showFile(int index) {
  if (index < 0 || index >= context_->fileCount()) return;
  const OpenDump& file = context_->file(index);
  if (file.path == path_) return;
  if (file.reader->health_blocks() == kHealthUnreadable) {  // the probe died reading them
    path_ = file.path;
    report_.reset();
    showReport();
    note_->setText(tr("the health statistics of %1 cannot be read: %2")
                       .arg(file.path, QString::fromStdString(
                                           file.reader->health_error().value_or(Error{}).message)));
    return;
  }
  load(file.path);
}

void HealthPanel::load(const QString& path) {
  path_ = path;
  note_->setText(tr("reading the health statistics of %1 ...").arg(path));
  const std::string file = path.toStdString();
  runner_->submit<HealthReport>(
      [file](const TaskControl&, QString* error) -> std::shared_ptr<const HealthReport> {
        Result<HealthTable> table = read_health_table(file);
        if (!table) {
          *error = QString::fromStdString(table.error().describe());
          return nullptr;
        }
        return std::make_shared<const HealthReport>(analyze_health(*table));
      },
      [this](std::shared_ptr<const HealthReport> report) {
        report_ = std::move(report);
        selected_ = -1;
        showReport();
      });
}

QString HealthPanel::note() const {
  return note_->text();
}

void HealthPanel::setMetric(HealthMetric metric) {
  metric_ = metric;
  metricBox_->setCurrentIndex(metricBox_->findData(static_cast<int>(metric)));
  showMap();
}

void HealthPanel::showReport() {
  warnings_->clear();
  steps_.clear();
  if (!report_ || report_->series.empty()) {
    map_->clear();
    trend_->clear();
    if (report_) {
      note_->setText(tr("%1 holds no health statistics: record with "
                        "attnscope_record.Recorder(..., stats=True) (on by default with "
                        "when=\"nonfinite\")")
                         .arg(path_));
    }
    emit loaded();
    return;
  }
  const HealthReport& r = *report_;
  for (const HealthSeries& s : r.series)
    steps_.insert(steps_.end(), s.steps.begin(), s.steps.end());
  std::sort(steps_.begin(), steps_.end());
  steps_.erase(std::unique(steps_.begin(), steps_.end()), steps_.end());
  int predicted = 0, notices = 0;
  for (const HealthWarning& w : r.warnings) {
    const bool warning = w.severity == "warning";
    predicted += warning;
    notices += !warning;
    auto* item = new QListWidgetItem(
        QStringLiteral("%1 %2: %3")
            .arg(warning ? tr("warning") : tr("notice"), QString::fromStdString(w.kind),
                 QString::fromStdString(w.text)),
        warnings_);
    item->setForeground(warning ? QColor(0xb0, 0x10, 0x10) : palette().text().color());
  }
  QString text = tr("%1 calls, steps %2 to %3, %4 heads · %5 warning(s), %6 notice(s)")
                     .arg(r.calls)
                     .arg(r.first_step)
                     .arg(r.last_step)
                     .arg(r.series.size())
                     .arg(predicted)
                     .arg(notices);
  if (r.first_nonfinite) {
    text += tr(" · first non-finite: step %1, %2")
                .arg(r.first_nonfinite->step)
                .arg(seriesName(r.series[r.first_nonfinite->series]));
  }
  text +=
      tr(" · rows: steps, columns: heads of layer 0, 1, ... (click: that head, and the "
         "step's case when recorded)");
  note_->setText(text);
  // The head to show first: the first warning's, else the least headroom at the last step.
  int first = -1;
  if (!r.warnings.empty()) first = static_cast<int>(r.warnings.front().series);
  double least = INFINITY;
  for (size_t k = 0; first < 0 && k < r.series.size(); ++k) {
    const HealthSeries& s = r.series[k];
    const double h = valueOf(s, s.steps.size() - 1, HealthMetric::headroom);
    if (h < least) least = h, first = static_cast<int>(k);
  }
  showMap();
  selectSeries(first < 0 ? 0 : first);
  emit loaded();
}

void HealthPanel::showMap() {
  if (!report_ || report_->series.empty()) return;
  const auto& series = report_->series;
  const int64_t rows = static_cast<int64_t>(steps_.size());
  const int64_t cols = static_cast<int64_t>(series.size());
  std::vector<float> cells(static_cast<size_t>(rows * cols), std::nanf(""));
  for (int64_t c = 0; c < cols; ++c) {
    const HealthSeries& s = series[static_cast<size_t>(c)];
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const auto row = std::lower_bound(steps_.begin(), steps_.end(), s.steps[i]) - steps_.begin();
      cells[static_cast<size_t>(row * cols + c)] = static_cast<float>(valueOf(s, i, metric_));
    }
  }
  map_->setGrid(std::make_shared<MatrixGrid>(
                    dense_grid("step x (layer, head)", std::move(cells), rows, cols)),
                true);
  // Headroom reads low = near the limit (dark) whatever its sign; the rest as the data says.
  if (metric_ == HealthMetric::headroom) {
    map_->setColormap(ColormapKind::sequential);
  } else {
    map_->setAutomaticColormap();
  }
  QMap<double, QString> names;
  const size_t every = std::max<size_t>(1, steps_.size() / 8);
  for (size_t i = 0; i < steps_.size(); i += every) {
    names[static_cast<double>(i)] = QString::number(steps_[i]);
  }
  map_->setRowAxis(tr("training step"), names);
  map_->setStamp(tr("%1 · %2").arg(path_, tr(infoOf(metric_).name)));
  if (selected_ >= 0) map_->setHighlight(MatrixWindow{0, rows, selected_, selected_ + 1});
}

void HealthPanel::selectSeries(int series) {
  if (!report_ || series < 0 || series >= static_cast<int>(report_->series.size())) return;
  selected_ = series;
  map_->setHighlight(
      MatrixWindow{0, static_cast<int64_t>(steps_.size()), selected_, selected_ + 1});
  showTrend();
}

void HealthPanel::showTrend() {
  const HealthReport& r = *report_;
  const HealthSeries& s = r.series[static_cast<size_t>(selected_)];
  TrendCurve measured{tr("max |logit|"), {}, {}, QColor(0x1f, 0x77, 0xb4), false, true};
  for (size_t i = 0; i < s.steps.size(); ++i) {
    measured.steps.push_back(static_cast<double>(s.steps[i]));
    measured.values.push_back(s.at(i, HealthStat::max_abs_logit));
  }
  std::vector<TrendCurve> curves{measured};
  std::vector<StepMarker> markers;
  for (const HealthWarning& w : r.warnings) {
    if (static_cast<int>(w.series) != selected_ || w.kind != "logit_growth") continue;
    markers.push_back({tr("first warning %1").arg(w.first_step), static_cast<double>(w.first_step),
                       QColor(0xe0, 0x80, 0x00)});
    if (!w.trend) break;
    const double from = static_cast<double>(w.trend->from_step);
    const double to = std::max(static_cast<double>(w.predicted_step.value_or(s.steps.back())),
                               static_cast<double>(w.band_high.value_or(s.steps.back())));
    TrendCurve fit{tr("%1 trend").arg(QString::fromStdString(w.trend->model_text())),
                   {},
                   {},
                   QColor(0xe0, 0x80, 0x00),
                   true,
                   false};
    TrendCurve upper{tr("band (2 sigma)"), {}, {}, QColor(0xe0, 0xb0, 0x60), true, false};
    TrendCurve lower{QString(), {}, {}, QColor(0xe0, 0xb0, 0x60), true, false};
    for (int k = 0; k <= 100; ++k) {
      const double t = from + (to - from) * k / 100.0;
      const double v = w.trend->value(t);
      fit.steps.push_back(t);
      fit.values.push_back(v);
      upper.steps.push_back(t);
      upper.values.push_back(v * std::exp(2 * w.trend->sigma));
      lower.steps.push_back(t);
      lower.values.push_back(v * std::exp(-2 * w.trend->sigma));
    }
    curves.insert(curves.end(), {fit, upper, lower});
    if (w.predicted_step && !w.crossed) {
      markers.push_back({tr("predicted %1").arg(*w.predicted_step),
                         static_cast<double>(*w.predicted_step), QColor(0xb0, 0x10, 0x10)});
    }
    break;
  }
  if (r.first_nonfinite) {
    markers.push_back({tr("non-finite %1").arg(r.first_nonfinite->step),
                       static_cast<double>(r.first_nonfinite->step), QColor(0x90, 0x00, 0x90)});
  }
  trend_->setData(
      seriesName(s), curves, s.limit,
      tr("limit %1: %2").arg(s.limit, 0, 'g', 4).arg(QString::fromStdString(s.limit_text)),
      markers);
}

void HealthPanel::onCellClicked(const CellReadout& cell) {
  const int64_t col = cell.col;
  if (!report_ || !cell.valid() || col >= static_cast<int64_t>(report_->series.size()) ||
      cell.row >= static_cast<int64_t>(steps_.size())) {
    return;
  }
  selectSeries(static_cast<int>(col));
  const HealthSeries& s = report_->series[static_cast<size_t>(col)];
  // A drawn cell may pool several steps: the latest of them with a recorded case of the layer.
  const int64_t first = cell.block.row_end > cell.block.row_begin ? cell.block.row_begin : cell.row;
  const int64_t last = std::min<int64_t>(
      cell.block.row_end > cell.block.row_begin ? cell.block.row_end : cell.row + 1,
      static_cast<int64_t>(steps_.size()));
  for (int64_t row = last - 1; row >= first; --row) {
    if (openCase(steps_[static_cast<size_t>(row)], s.layer)) return;
  }
  const int64_t a = steps_[static_cast<size_t>(first)], b = steps_[static_cast<size_t>(last - 1)];
  QToolTip::showText(QCursor::pos(),
                     tr("%1: statistics only, no case of layer %2 was recorded")
                         .arg(a == b ? tr("step %1").arg(a) : tr("steps %1-%2").arg(a).arg(b))
                         .arg(s.layer),
                     map_);
}

bool HealthPanel::openCase(int64_t step, int64_t layer) {
  for (int f = 0; f < context_->fileCount(); ++f) {
    if (context_->file(f).path != path_) continue;
    for (const CaseInfo& c : context_->file(f).reader->cases()) {
      if (c.config.step == step && c.config.layer == layer) {
        return context_->selectCase(f, QString::fromStdString(c.path));
      }
    }
  }
  return false;
}

}  // namespace attnscope
