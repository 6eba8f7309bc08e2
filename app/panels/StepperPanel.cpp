// Stepper position, controls and tile / accumulator heatmaps (see StepperPanel.h).
#include "app/panels/StepperPanel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QTabWidget>
#include <QToolButton>
#include <QVBoxLayout>

#include "app/gui/SessionContext.h"
#include "app/gui/StepperController.h"
#include "app/plot/HeatmapView.h"

namespace attnscope {
namespace {

// The tabs: the current tile's intermediates, then the accumulators and stored gradients
// (StepperSnapshot's grids), with their rows and columns.
struct StepperView {
  const char* name;
  const char* rows;
  const char* cols;
};
const StepperView kViews[] = {{"tile S", "query i", "key j"},
                              {"tile P", "query i", "key j"},
                              {"tile dP", "query i", "key j"},
                              {"tile dS", "query i", "key j"},
                              {"D", "query i", ""},
                              {"dQ acc", "query i", "feature"},
                              {"dK_j acc", "key j", "feature"},
                              {"dV_j acc", "key j", "feature"},
                              {"dK", "key j", "feature"},
                              {"dV", "key j", "feature"},
                              {"dQ", "query i", "feature"}};

// The tab that shows what a stage computes (where a value it made non-finite is seen).
const char* stageView(StepStage stage) {
  switch (stage) {
    case StepStage::backward_preprocess:
      return "D";
    case StepStage::recompute_p:
      return "tile P";
    case StepStage::accumulate_dv:
      return "dV_j acc";
    case StepStage::compute_dp:
      return "tile dP";
    case StepStage::compute_ds:
      return "tile dS";
    case StepStage::accumulate_dq:
      return "dQ acc";
    case StepStage::accumulate_dk:
      return "dK_j acc";
    case StepStage::store_dk_dv:
      return "dK";
    case StepStage::store_dq:
      return "dQ";
    default:
      return "tile S";
  }
}

QString tileText(int64_t tile) {
  return tile < 0 ? QStringLiteral("all") : QString::number(tile);
}

QString countText(const NonfiniteCount& c) {
  return QStringLiteral("NaN %1, +inf %2, -inf %3").arg(c.nan).arg(c.pos_inf).arg(c.neg_inf);
}

QToolButton* button(const QString& text, const QString& tip, QWidget* parent) {
  auto* b = new QToolButton(parent);
  b->setText(text);
  b->setToolTip(tip);
  return b;
}

}  // namespace

StepperPanel::StepperPanel(SessionContext* context, StepperController* stepper, QWidget* parent)
    : QWidget(parent), context_(context), stepper_(stepper) {
  summary_ = new QLabel(this);
  summary_->setObjectName(QStringLiteral("stepperSummary"));
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* restart = button(tr("restart"), tr("Restart: nothing ran"), this);
  auto* back = button(tr("◀ step"), tr("Step back (Shift+F10)"), this);
  auto* forward = button(tr("step ▶"), tr("Step forward (F10)"), this);
  auto* run = button(tr("run to non-finite"),
                     tr("Run to the next step that makes a value "
                        "non-finite (F5)"),
                     this);
  slider_ = new QSlider(Qt::Horizontal, this);
  slider_->setObjectName(QStringLiteral("stepperSlider"));
  slider_->setRange(0, 0);
  tabs_ = new QTabWidget(this);
  tabs_->setObjectName(QStringLiteral("stepperTabs"));
  for (const StepperView& v : kViews) {
    addView(QString::fromLatin1(v.name),
            {QString::fromLatin1(v.rows), QString::fromLatin1(v.cols)});
  }

  auto* buttons = new QHBoxLayout;
  for (QToolButton* b : {restart, back, forward, run}) buttons->addWidget(b);
  buttons->addWidget(slider_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(buttons);
  layout->addWidget(summary_);
  layout->addWidget(tabs_, 1);

  connect(restart, &QToolButton::clicked, stepper_, &StepperController::restart);
  connect(back, &QToolButton::clicked, stepper_, &StepperController::stepBack);
  connect(forward, &QToolButton::clicked, stepper_, &StepperController::stepForward);
  connect(run, &QToolButton::clicked, stepper_, &StepperController::runToNextNonfinite);
  connect(slider_, &QSlider::valueChanged, stepper_,
          [this](int position) { stepper_->seek(position); });
  connect(stepper_, &StepperController::snapshotChanged, this, &StepperPanel::showSnapshot);
  showSnapshot();
}

void StepperPanel::addView(const QString& name, const HeatmapAxes& axes) {
  const bool sequential = name == QStringLiteral("tile P");
  auto* v = new HeatmapView(name, sequential ? ColormapKind::sequential : ColormapKind::diverging,
                            axes, tabs_);
  v->setObjectName(QStringLiteral("stepper_") + name);
  tabs_->addTab(v, name);
  views_[name] = v;
  connect(v, &HeatmapView::cellHovered, context_, &SessionContext::setHovered);
  connect(v, &HeatmapView::cellClicked, context_, &SessionContext::pin);
}

HeatmapView* StepperPanel::view(const QString& name) const {
  const auto it = views_.find(name);
  return it == views_.end() ? nullptr : it->second;
}

QString StepperPanel::summary() const {
  return summary_->text();
}

void StepperPanel::showSnapshot() {
  const auto snap = stepper_->snapshot();
  if (!snap) {
    summary_->setText(
        !stepper_->eagerText().isEmpty()
            ? stepper_->eagerText()
            : tr("The backward of the head on screen, step by step, in its kernel: F10 steps, "
                 "Shift+F10 steps back, F5 runs to the next non-finite value (on through the "
                 "case's other heads)."));
    for (auto& [name, v] : views_) v->clear();
    const QSignalBlocker block(slider_);
    slider_->setValue(0);
    return;
  }
  const StepInfo& s = snap->step;
  QString text = tr("step %1 / %2 · %3")
                     .arg(snap->position)
                     .arg(snap->size)
                     .arg(QString::fromLatin1(step_stage_name(s.stage)));
  if (s.index >= 0) {
    text += tr(" · q tile %1, kv tile %2 · rows %3-%4, keys %5-%6")
                .arg(tileText(s.q_tile), tileText(s.kv_tile))
                .arg(s.window.row_begin)
                .arg(s.window.row_end - 1)
                .arg(s.window.col_begin)
                .arg(s.window.col_end - 1);
    text += tr("\nnon-finite in its output: %1 (%2 new)")
                .arg(countText(s.nonfinite))
                .arg(s.new_nonfinite);
    if (s.new_nonfinite > 0) text += tr(" · tab %1").arg(QLatin1String(stageView(s.stage)));
  }
  text += tr("\n%1 · b%2 h%3 · %4 · tiles %5x%6 of %7x%8 · kv tiles done %9")
              .arg(QString::fromStdString(snap->case_path))
              .arg(snap->batch)
              .arg(snap->head)
              .arg(QString::fromLatin1(precision_name(snap->precision)))
              .arg(snap->q_tiles)
              .arg(snap->kv_tiles)
              .arg(snap->tile_rows)
              .arg(snap->tile_cols)
              .arg(snap->kv_tiles_done);
  if (snap->found) {
    text += snap->heads_searched == 0
                ? tr("\nstopped: this step made a value non-finite")
                : tr("\nstopped in b%1 h%2 after %3 more head(s) ran to their end without one: "
                     "this step made a value non-finite")
                      .arg(snap->batch)
                      .arg(snap->head)
                      .arg(snap->heads_searched);
  } else if (snap->searched_to_end) {
    text += tr("\nran to the end of this head and of the %1 after it in the case: no later "
               "step makes a value non-finite")
                .arg(snap->heads_searched);
  }
  summary_->setText(text);
  {
    const QSignalBlocker block(slider_);
    slider_->setRange(0, static_cast<int>(snap->size));
    slider_->setValue(static_cast<int>(snap->position));
  }
  for (auto& [name, v] : views_) {
    const MatrixGrid* g = snap->grid(name.toStdString());
    if (g == nullptr || g->empty()) {
      v->clear();
      continue;
    }
    v->setGrid(std::shared_ptr<const MatrixGrid>(snap, g), true);
    v->setStamp(QStringLiteral("step %1 %2")
                    .arg(snap->position)
                    .arg(QString::fromLatin1(step_stage_name(s.stage))));
  }
  // A step that made values non-finite (stepped to, or where run to non-finite stopped) brings
  // forward the tab that shows them.
  if (s.index >= 0 && s.new_nonfinite > 0) {
    tabs_->setCurrentWidget(view(QString::fromLatin1(stageView(s.stage))));
  }
}

}  // namespace attnscope
