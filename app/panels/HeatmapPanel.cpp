// Heatmap tabs bound to the SessionContext (see HeatmapPanel.h).
#include "app/panels/HeatmapPanel.h"

#include <QLabel>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>

#include "app/gui/SessionContext.h"
#include "app/plot/HeatmapView.h"

namespace attnscope {
namespace {

// The block of a matrix that the stepper's tile covers: score tiles as they are, query rows of
// O / dQ, key rows of dK / dV (all feature columns).
MatrixWindow tileBlock(HeadView view, const StepTile& t, int64_t cols) {
  const MatrixWindow& w = t.window;
  if (is_score_view(view)) return w;
  if (has_key_rows(view)) return {w.col_begin, w.col_end, 0, cols};
  return {w.row_begin, w.row_end, 0, cols};
}

QString describe(const HeadResult& r) {
  const MatrixGrid& s = *r.scoreGrid();
  QString text = QStringLiteral("Sq=%1 Sk=%2 D=%3").arg(r.seqlen_q).arg(r.seqlen_k).arg(r.head_dim);
  text += s.pooled
              ? QStringLiteral(" · S/P/dP/dS pooled to %1x%2 cells over rows %3-%4, keys %5-%6")
                    .arg(s.rows)
                    .arg(s.cols)
                    .arg(s.row_edges.front())
                    .arg(s.row_edges.back() - 1)
                    .arg(s.col_edges.front())
                    .arg(s.col_edges.back() - 1)
              : QStringLiteral(" · full resolution");
  if (!r.has_dout) text += QStringLiteral(" · no dO in the case: dO = 1 (gradient of sum(O))");
  if (r.backend != "cpu") {
    text += QStringLiteral(" · O, LSE, gradients from %1").arg(QString::fromStdString(r.backend));
  }
  if (r.p->empty() || r.dp->empty() || r.ds->empty() || r.s->empty()) {
    text += QStringLiteral(" · other score tabs computed when shown");
  }
  if (r.o_err.empty()) text += QStringLiteral(" · error tabs computed when shown");
  return text + QStringLiteral(" · %1 ms").arg(r.elapsed_ms, 0, 'f', 1);
}

}  // namespace

HeatmapPanel::HeatmapPanel(SessionContext* context, QWidget* parent)
    : QWidget(parent), context_(context) {
  tabs_ = new QTabWidget(this);
  tabs_->setObjectName(QStringLiteral("heatmapTabs"));
  for (HeadView v : kHeadViews) {
    auto* view = new HeatmapView(v, tabs_);
    view->setObjectName(QStringLiteral("heatmap_") + view->name());
    tabs_->addTab(view, view->name());
    views_[v] = view;
    connect(view, &HeatmapView::cellHovered, context_, &SessionContext::setHovered);
    connect(view, &HeatmapView::cellClicked, context_, &SessionContext::pin);
    if (is_score_view(v)) {
      connect(view, &HeatmapView::viewWindowChanged, this, [this, view](const MatrixWindow& w) {
        context_->setScoreView(w, view->plotPixelSize());
      });
    }
  }
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("heatmapStatus"));
  // Its text changes with every result: its width must not resize the tabs (and the window).
  status_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(tabs_, 1);
  layout->addWidget(status_);

  resizeTimer_ = new QTimer(this);
  resizeTimer_->setSingleShot(true);
  resizeTimer_->setInterval(300);
  connect(resizeTimer_, &QTimer::timeout, this, &HeatmapPanel::reportView);
  connect(context_, &SessionContext::resultChanged, this, &HeatmapPanel::showResult);
  connect(context_, &SessionContext::stepChanged, this, &HeatmapPanel::showStepTile);
  connect(context_, &SessionContext::focusRequested, this, &HeatmapPanel::showFocus);
  connect(tabs_, &QTabWidget::currentChanged, this, &HeatmapPanel::onTabShown);
  onTabShown();
}

void HeatmapPanel::onTabShown() {
  const HeadView shown = currentHeadView();
  context_->setReferenceWanted(is_error_view(shown));
  ScoreSet wanted{};
  if (is_score_view(shown)) wanted[static_cast<size_t>(score_view_index(shown))] = true;
  context_->setScoresWanted(wanted);
}

void HeatmapPanel::showStepTile() {
  const StepTile& t = context_->stepTile();
  for (auto& [v, view] : views_) {
    const MatrixGrid* g = view->grid();
    if (!t.valid || g == nullptr) {
      view->setHighlight(std::nullopt);
      continue;
    }
    view->setHighlight(tileBlock(v, t, g->total_cols));
  }
}

void HeatmapPanel::showFocus(const FocusTarget& target) {
  pendingFocus_ = target;
  const auto r = context_->result();
  // The location is shown on the result of the target's head, which may still be computing.
  if (r && (target.batch < 0 || r->request.batch == target.batch) &&
      (target.head < 0 || r->request.head == target.head)) {
    applyFocus();
  }
}

void HeatmapPanel::applyFocus() {
  if (!pendingFocus_) return;
  const FocusTarget target = *pendingFocus_;
  pendingFocus_.reset();
  const std::optional<HeadView> shown = head_view_of_tensor(target.tensor.toStdString());
  if (!shown) return;
  showView(*shown);
  HeatmapView* v = view(*shown);
  const MatrixGrid* g = v->grid();
  if (g == nullptr || g->empty()) {
    // Pooled score grids are computed when their tab is shown.
    if (is_score_view(*shown)) pendingFocus_ = target;
    return;
  }
  const MatrixWindow& at = target.window;
  if (at.row_end < 0) return;  // every row: nothing to zoom to
  MatrixWindow w{at.row_begin, at.row_end, 0, g->total_cols};
  if (at.col_end >= 0 && is_score_view(*shown)) {
    w.col_begin = at.col_begin;
    w.col_end = at.col_end;
  }
  // Some context around a small range, so that the block is seen next to its neighbours.
  const int64_t padRows = std::max<int64_t>(4, (w.row_end - w.row_begin) / 4);
  w.row_begin = std::max<int64_t>(0, w.row_begin - padRows);
  w.row_end = std::min(g->total_rows, w.row_end + padRows);
  v->zoomTo(w);
}

HeatmapView* HeatmapPanel::currentView() const {
  return static_cast<HeatmapView*>(tabs_->currentWidget());
}

HeadView HeatmapPanel::currentHeadView() const {
  return kHeadViews[tabs_->currentIndex()];  // the tabs are in kHeadViews order
}

void HeatmapPanel::showView(HeadView view) {
  tabs_->setCurrentWidget(views_.at(view));
}

void HeatmapPanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  resizeTimer_->start();
}

void HeatmapPanel::reportView() {
  // The score views share one window: the shown one stands for all four, else the first
  // that has a grid (pooled grids are computed for the shown tab only).
  HeatmapView* shown = currentView();
  if (!is_score_view(currentHeadView()) || shown->grid() == nullptr) shown = nullptr;
  for (HeadView v : kScoreViews) {
    if (shown == nullptr && view(v)->grid() != nullptr) shown = view(v);
  }
  if (shown != nullptr) context_->setScoreView(shown->visibleWindow(), shown->plotPixelSize());
}

void HeatmapPanel::showResult() {
  const std::shared_ptr<const HeadResult> r = context_->result();
  if (!r) {
    for (auto& [v, view] : views_) view->clear();
    status_->clear();
    return;
  }
  const QString key = QStringLiteral("%1|%2|%3|%4")
                          .arg(QString::fromStdString(r->case_path))
                          .arg(context_->fileIndex())
                          .arg(r->request.batch)
                          .arg(r->request.head);
  const bool reset = key != shownKey_;
  shownKey_ = key;
  const QString stamp = context_->stamp();
  for (auto& [v, view] : views_) {
    const MatrixGrid& grid = r->grid(v);
    if (grid.empty()) {
      view->clear();
      continue;
    }
    // Aliasing pointer: the grid stays alive as long as the result it belongs to.
    view->setGrid(std::shared_ptr<const MatrixGrid>(r, &grid), reset);
    view->setStamp(stamp);
  }
  showStepTile();
  applyFocus();
  status_->setText(describe(*r));
  // A pooled result was sized for the pixels known when it was requested; once the layout has
  // settled, report the real size (a recompute follows only if it differs).
  if (r->scoreGrid()->pooled) resizeTimer_->start();
}

}  // namespace attnscope
