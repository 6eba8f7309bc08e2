// Heatmap tabs bound to the SessionContext (see HeatmapPanel.h).
#include "app/panels/HeatmapPanel.h"

#include <QLabel>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>

#include "app/gui/SessionContext.h"
#include "app/plot/AnnotationLayer.h"
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
    connect(view, &HeatmapView::viewWindowChanged, this, [this, v, view](const MatrixWindow& w) {
      if (is_score_view(v)) context_->setScoreView(w, view->plotPixelSize());
      const MatrixGrid* g = view->grid();
      if (g == nullptr) return;
      const bool whole = w == MatrixWindow{0, g->total_rows, 0, g->total_cols};
      context_->reportZoom(v, whole ? std::nullopt : std::optional<MatrixWindow>(w));
    });
    connect(view, &HeatmapView::coloursChanged, this,
            [this, v, view] { context_->setColours(v, view->colours()); });
    AnnotationLayer* layer = AnnotationLayer::of(view);
    const QString name = view->name();
    connect(layer, &AnnotationLayer::placed, this,
            [this, name](const Annotation& a) { context_->annotations()->place(name, a); });
    connect(layer, &AnnotationLayer::moved, context_->annotations(), &AnnotationBoard::replace);
    connect(layer, &AnnotationLayer::editRequested, context_->annotations(),
            &AnnotationBoard::editText);
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
  connect(context_, &SessionContext::regionRequested, this, &HeatmapPanel::showRegion);
  connect(context_, &SessionContext::viewRequested, this, [this](HeadView v) {
    // A tab asked for later wins over a region still waiting for its result (a restored
    // zoom must not bring its tab back over the command line's --matrix).
    if (pending_ && pending_->request.view != v) pending_.reset();
    tabs_->setCurrentWidget(views_.at(v));
  });
  connect(context_, &SessionContext::zoomRequested, this, &HeatmapPanel::zoom);
  connect(context_, &SessionContext::coloursChanged, this,
          [this](HeadView v) { views_.at(v)->setColours(context_->colours(v)); });
  connect(context_->annotations(), &AnnotationBoard::changed, this, &HeatmapPanel::showAnnotations);
  connect(context_->annotations(), &AnnotationBoard::toolChanged, this,
          &HeatmapPanel::showAnnotations);
  connect(tabs_, &QTabWidget::currentChanged, this, &HeatmapPanel::onTabShown);
  onTabShown();
}

void HeatmapPanel::onTabShown() {
  const HeadView shown = kHeadViews[tabs_->currentIndex()];  // the tabs are in kHeadViews order
  context_->setShownView(shown);
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

void HeatmapPanel::showAnnotations() {
  const AnnotationBoard* board = context_->annotations();
  for (auto& [v, view] : views_) {
    AnnotationLayer* layer = AnnotationLayer::of(view);
    layer->setTool(board->tool());
    layer->setAnnotations(board->drawn(view->name()));
  }
}

void HeatmapPanel::showRegion(const RegionRequest& request) {
  pending_ = PendingRegion{request, context_->casePath(), false};
  tabs_->setCurrentWidget(views_.at(request.view));
  applyRegion();
}

void HeatmapPanel::applyRegion() {
  if (!pending_) return;
  const RegionRequest& r = pending_->request;
  if (pending_->casePath != context_->casePath()) {
    pending_.reset();  // another case was selected meanwhile
    return;
  }
  const auto result = context_->result();
  HeatmapView* v = views_.at(r.view);
  if (!result || result->case_path != pending_->casePath.toStdString() ||
      result->request.batch != r.batch || result->request.head != r.head || v->grid() == nullptr ||
      v->grid()->empty()) {
    return;  // the result of that head (or a pooled score tab's grid) is still computing
  }
  tabs_->setCurrentWidget(v);
  if (!pending_->zoomed) {
    zoom(r.view, r.window);
    pending_->zoomed = true;
  }
  const MatrixGrid* g = v->grid();
  std::optional<std::pair<int64_t, int64_t>> pin = r.pin;
  if (!pin && r.pinFirstNonfinite) {
    // The first non-finite cell of the window, row-major, once the grid shows the window at
    // full resolution or pooled over exactly it (the zoomed recompute).
    MatrixWindow w = r.window;
    if (w.row_end < 0) w.row_begin = 0, w.row_end = g->total_rows;
    if (w.col_end < 0) w.col_begin = 0, w.col_end = g->total_cols;
    if (g->pooled && (g->row_edges.front() != w.row_begin || g->row_edges.back() != w.row_end)) {
      return;  // the zoomed window is still computing
    }
    for (int64_t i = 0; i < g->rows && !pin; ++i) {
      const int64_t row = g->row_edges[static_cast<size_t>(i)];
      if (row < w.row_begin || row >= w.row_end) continue;
      for (int64_t j = 0; j < g->cols && !pin; ++j) {
        const CellClass c = g->cls[static_cast<size_t>(i * g->cols + j)];
        const int64_t col = g->col_edges[static_cast<size_t>(j)];
        if (c != CellClass::finite && c != CellClass::masked && col >= w.col_begin &&
            col < w.col_end) {
          pin = std::make_pair(row, col);
        }
      }
    }
  }
  if (!pin) {
    pending_.reset();
    return;
  }
  // A pooled grid becomes full resolution once the zoomed window is recomputed.
  const CellReadout readout = g->readout(pin->first, pin->second);
  if (!readout.valid() || (readout.pooled && r.pin)) return;
  pending_.reset();
  context_->setHovered(readout);
  context_->pin(readout);
}

void HeatmapPanel::zoom(HeadView view, const MatrixWindow& window) {
  HeatmapView* v = views_.at(view);
  const MatrixGrid* g = v->grid();
  if (g == nullptr) return;
  MatrixWindow w = window;
  if (w.row_end < 0) w.row_end = g->total_rows;
  if (w.col_end < 0) w.col_end = g->total_cols;
  if (w == MatrixWindow{0, g->total_rows, 0, g->total_cols}) {
    v->resetZoom();
  } else {
    v->zoomTo(w);
  }
}

HeatmapView* HeatmapPanel::currentView() const {
  return static_cast<HeatmapView*>(tabs_->currentWidget());
}

void HeatmapPanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  resizeTimer_->start();
}

void HeatmapPanel::reportView() {
  // The score views share one window: the shown one stands for all four, else the first
  // that has a grid (pooled grids are computed for the shown tab only).
  HeatmapView* shown = currentView();
  if (!is_score_view(context_->shownView()) || shown->grid() == nullptr) shown = nullptr;
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
  applyRegion();
  status_->setText(describe(*r));
  // A pooled result was sized for the pixels known when it was requested; once the layout has
  // settled, report the real size (a recompute follows only if it differs).
  if (r->scoreGrid()->pooled) resizeTimer_->start();
}

}  // namespace attnscope
